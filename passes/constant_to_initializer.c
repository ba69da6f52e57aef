/* constant_to_initializer.c: being written */
