/* text_parse.c: being written */
