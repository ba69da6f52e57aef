/* passes.c — THE pass table, in default pipeline order. Adding a pass is one
 * .c file, one row here, one line in meson.build and one lit test.
 * A group name ("canonicalize") stands for its rows, in table order. */
#include <string.h>
#include "passes.h"

const Pass pass_table[] = {
	{"constant-to-initializer", pass_constant_to_initializer,
	 "nothing", "nothing (Constant nodes become initializers)", "canonicalize",
	 "turn Constant nodes into initializers"},
	{"identity-elim", pass_identity_elim,
	 "use lists", "nothing", "canonicalize",
	 "remove Identity nodes, rewiring their users"},
	{"dce", pass_dce,
	 "use lists", "nothing", "canonicalize",
	 "remove nodes and initializers that no graph output depends on"},
	{"shape-infer", pass_shape_infer,
	 "topological order", "nothing (refines Value.type)", "canonicalize",
	 "infer element types and shapes (symbolic dims kept)"},
};
const int pass_count = (int)(sizeof pass_table / sizeof pass_table[0]);

const Pass *pass_find(const char *name)
{
	for (int i = 0; i < pass_count; i++)
		if (strcmp(pass_table[i].name, name) == 0)
			return &pass_table[i];
	return NULL;
}
