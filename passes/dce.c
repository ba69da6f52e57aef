/* dce.c: being written */
