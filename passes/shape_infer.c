/* shape_infer.c: being written */
