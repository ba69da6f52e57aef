/* target.c — what every target shares: target names, the Chimera presets,
 * and the manifest facts of a compilation (target.h). */
#include <string.h>
#include "targets/target.h"

TargetKind target_parse(const char *name)
{
	if (!name) return TARGET_NONE;
	if (!strcmp(name, "qc-n")) return TARGET_QC_N;
	if (!strcmp(name, "qc-p")) return TARGET_QC_P;
	if (!strcmp(name, "qc-u")) return TARGET_QC_U;
	if (!strcmp(name, "host")) return TARGET_HOST;
	return TARGET_NONE;
}

void chimera_config_preset(TargetKind kind, ChimeraConfig *c)
{
	int pe = kind == TARGET_QC_N ? 8 : kind == TARGET_QC_U ? 32 : 16;
	*c = (ChimeraConfig){.cores = 4, .pe_rows = pe, .pe_cols = pe, .macs_per_pe = 16,
	                     .lrm_bytes = 4096, .ocm_bytes = 16u << 20, .clock_hz = 1.7e9,
	                     .ext_bw = 128e9};
}

int target_transpose_plan(const char *model, const Node *n, TransposePlan *p, Diag *d)
{
	const Value *x = n->ninputs > 0 ? n->inputs[0] : NULL, *y = n->noutputs > 0 ? n->outputs[0] : NULL;
	const char *nn = n->name && *n->name ? n->name : y ? y->name : "?";
	if (!x || !y || !x->type.has_shape || !y->type.has_shape || x->type.rank > 8 || y->type.rank != x->type.rank)
		return diag_fail(d, "%s: node '%s': Transpose: input and output need static shapes of the same rank <= 8",
		                 model, nn);
	int r = x->type.rank;
	int64_t dims[8], st[8], perm[8];
	for (int i = 0; i < r; i++) {
		if (x->type.dims[i].kind != DIM_VALUE)
			return diag_fail(d, "%s: node '%s': Transpose: tensor '%s': dim %d is not static", model, nn,
			                 x->name, i);
		dims[i] = x->type.dims[i].value;
	}
	int64_t run = 1;
	for (int i = r - 1; i >= 0; i--) {
		st[i] = run;
		run *= dims[i];
	}
	const int64_t *pa = NULL;
	int np = attr_ints(n, "perm", &pa);
	bool seen[8] = {false};
	for (int i = 0; i < r; i++) {
		perm[i] = np > 0 ? (np == r ? pa[i] : -1) : r - 1 - i;
		if (perm[i] < 0 || perm[i] >= r || seen[perm[i]])
			return diag_fail(d, "%s: node '%s': Transpose: perm is not a permutation of the %d dims of '%s'", model,
			                 nn, r, x->name);
		seen[perm[i]] = true;
	}
	int m = 0;
	int64_t o[8], s[8];
	for (int i = 0; i < r; i++) {
		int64_t di = dims[perm[i]], si = st[perm[i]];
		if (di == 1)
			continue;
		if (m > 0 && s[m - 1] == si * di) {
			o[m - 1] *= di;
			s[m - 1] = si;
			continue;
		}
		o[m] = di;
		s[m] = si;
		m++;
	}
	if (m > 4)
		return diag_fail(d, "%s: node '%s': Transpose: tensor '%s': %d dims remain after merging the dims that move "
		                 "together (at most 4 supported)", model, nn, x->name, m);
	for (int i = 0; i < 4; i++) {
		p->o[i] = i < 4 - m ? 1 : o[i - (4 - m)];
		p->s[i] = i < 4 - m ? 0 : s[i - (4 - m)];
	}
	return WL_OK;
}

ManifestInfo target_manifest_info(const TargetOptions *o)
{
	return (ManifestInfo){.model_path = o->model_path, .target_name = o->target_name,
	                      .fuse = o->fuse, .passes_run = o->passes_run,
	                      .npasses_run = o->npasses_run, .t_start_ms = o->t_start_ms};
}
