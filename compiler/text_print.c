/* text_print.c: being written */
