/* passes.h — entry points of the passes; the table is in passes.c. */
#ifndef WLOWER_PASSES_H
#define WLOWER_PASSES_H
#include "compiler.h"

int pass_constant_to_initializer(Module *m, PassContext *ctx, Diag *d);
int pass_dce(Module *m, PassContext *ctx, Diag *d);
int pass_identity_elim(Module *m, PassContext *ctx, Diag *d);
int pass_shape_infer(Module *m, PassContext *ctx, Diag *d);
/* canonicalize (issue 4) */
int pass_fold_constants(Module *m, PassContext *ctx, Diag *d);
int pass_canonicalize_layernorm(Module *m, PassContext *ctx, Diag *d);
int pass_canonicalize_gelu(Module *m, PassContext *ctx, Diag *d);
int pass_canonicalize_rmsnorm(Module *m, PassContext *ctx, Diag *d);
int pass_canonicalize_silu(Module *m, PassContext *ctx, Diag *d);
/* fuse (issue 4) */
int pass_fuse_conv_stem(Module *m, PassContext *ctx, Diag *d);
int pass_fuse_ms_attention(Module *m, PassContext *ctx, Diag *d);
int pass_fuse_whisper_attention(Module *m, PassContext *ctx, Diag *d);
int pass_fuse_gqa(Module *m, PassContext *ctx, Diag *d);
int pass_fuse_matmul_nbits(Module *m, PassContext *ctx, Diag *d);
int pass_fuse_qkv(Module *m, PassContext *ctx, Diag *d);
int pass_fuse_logmel(Module *m, PassContext *ctx, Diag *d);
int pass_fuse_argmax(Module *m, PassContext *ctx, Diag *d);
int pass_fp16_attention(Module *m, PassContext *ctx, Diag *d);
int pass_assign_fracbits(Module *m, PassContext *ctx, Diag *d);

/* fuse_logmel.c: Whisper's mel filters [n_mels, 201] (librosa Slaney, sr 16000,
 * n_fft 400) into out. */
void whisper_mel_filters(int n_mels, float *out);

/* shape_infer.c: infer one node's output types from its inputs (used by
 * passes that create nodes). Unknown ops keep declared types. */
int shape_infer_node(Node *n, Diag *d);

/* fuse_util.c: names and provenance of the nodes a rewrite creates. The
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
