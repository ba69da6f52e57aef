/* match.h — what the canonicalize and fuse passes share (passes/match.c). */
#ifndef WLOWER_MATCH_H
#define WLOWER_MATCH_H
#include "compiler.h"

/* Names and provenance of the nodes a rewrite creates. The
 * name is the replaced nodes' common "/a/b/" prefix + suffix, else
 * "/<op>_<counter++>"; fused_from lists the replaced nodes' names in order. */
const char *fused_node_name(Module *m, Node *const *nodes, int nn, const char *suffix,
                            const char *op, int *counter);
void set_fused_from(Module *m, Node *n, Node *const *nodes, int nn);
bool node_in(Node *const *nodes, int nn, const Node *n);
/* A match may be replaced only if every value its nodes produce is read
 * inside it, except `out` and the `late` values (present K/V), whose readers
 * outside must come after `last` in the same graph. */
bool match_is_private(Node *const *nodes, int nn, const Node *last, const Value *out,
                      const Value *const *late, int nlate);

#endif
