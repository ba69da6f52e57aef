/* passes.h — entry points of the passes; the table is in passes.c. */
#ifndef WLOWER_PASSES_H
#define WLOWER_PASSES_H
#include "compiler.h"

int pass_constant_to_initializer(Module *m, PassContext *ctx, Diag *d);
int pass_dce(Module *m, PassContext *ctx, Diag *d);
int pass_identity_elim(Module *m, PassContext *ctx, Diag *d);
int pass_shape_infer(Module *m, PassContext *ctx, Diag *d);

/* shape_infer.c: infer one node's output types from its inputs (used by
 * passes that create nodes). Unknown ops keep declared types. */
int shape_infer_node(Node *n, Diag *d);

#endif
