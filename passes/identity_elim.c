/* identity_elim.c: being written */
