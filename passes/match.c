/* match.c — what every rewriting pass needs for the nodes it creates:
 * a stable, readable name and the `fused_from` attribute (docs/OPS.md). */
#include <string.h>
#include "match.h"

const char *fused_node_name(Module *m, Node *const *nodes, int nn, const char *suffix,
                            const char *op, int *counter)
{
	const char *first = nodes[0]->name ? nodes[0]->name : "";
	size_t len = strlen(first);
	for (int i = 1; i < nn; i++) {
		const char *s = nodes[i]->name ? nodes[i]->name : "";
		size_t k = 0;
		while (k < len && s[k] == first[k])
			k++;
		len = k;
	}
	while (len > 0 && first[len - 1] != '/')
		len--;
	if (len > 1)
		return arena_printf(m->arena, "%.*s%s", (int)len, first, suffix);
	return arena_printf(m->arena, "/%s_%d", op, (*counter)++);
}

void set_fused_from(Module *m, Node *n, Node *const *nodes, int nn)
{
	Attr *a = node_add_attr(n, "fused_from", AT_STRINGS);
	a->n = nn;
	a->strings = arena_alloc(m->arena, (size_t)(nn ? nn : 1) * sizeof *a->strings);
	for (int i = 0; i < nn; i++) {
		const char *s = nodes[i]->name ? nodes[i]->name : "";
		a->strings[i] = (StrRef){arena_strdup(m->arena, s), strlen(s)};
	}
}

bool node_in(Node *const *nodes, int nn, const Node *n)
{
	for (int i = 0; i < nn; i++)
		if (nodes[i] == n)
			return true;
	return false;
}

bool match_is_private(Node *const *nodes, int nn, const Node *last, const Value *out,
                      const Value *const *late, int nlate)
{
	for (int i = 0; i < nn; i++) {
		Node *n = nodes[i];
		for (int j = 0; j < n->noutputs; j++) {
			Value *v = n->outputs[j];
			if (!v || v == out)
				continue;
			bool is_late = false;
			for (int k = 0; k < nlate; k++)
				is_late |= late[k] && v == late[k];
			if (v->is_output && !is_late)
				return false;
			for (int u = 0; u < v->nusers; u++) {
				Node *r = v->users[u].node;
				if (node_in(nodes, nn, r))
					continue;
				if (!is_late || r->graph != last->graph)
					return false;
				bool after = false;
				for (Node *x = last->next; x && !after; x = x->next)
					after = x == r;
				if (!after)
					return false;
			}
		}
	}
	return true;
}
