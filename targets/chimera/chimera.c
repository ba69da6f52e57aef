/* chimera.c — chimera_compile: lower the fused, numerics-annotated module to
 * CCL-style C++ plus schedule.json, weights.bin and manifest.json.
 *
 *   ch_lower   (lower.c)    kernel list, checks, op rows + kernel info (ops/), liveness
 *   ch_alloc   (alloc.c)    weights.bin layout, OCM/DDR buffers, DMA, spills
 *   ch_tile    (lower.c)    core split, tiling, per-core counts
 *   ch_emit    (emit_cpp.c) module.cpp, weights.bin, schedule.json
 *   manifest   (runtime/module/manifest.c) + hardware and program extras
 */
#include <stdlib.h>
#include <string.h>
#include "chimera.h"

int chimera_compile(Module *m, const TargetOptions *o, const char *dir, Diag *d)
{
	ChModule cm = {.m = m, .o = o, .cfg = &o->chimera, .a = m->arena};
	Manifest *mf = NULL;
	int rc = WL_ERR;
	if (ch_lower(&cm, d) != WL_OK || ch_alloc(&cm, d) != WL_OK)
		goto out;
	ch_tile(&cm);
	if (ch_emit(&cm, dir, d) != WL_OK)
		goto out;
	ManifestInfo mi = target_manifest_info(o);
	if (manifest_new(m, &mi, &mf, d) != WL_OK)
		goto out;
	cJSON *hw = manifest_hardware(mf), *cfg = chimera_config_json(&o->chimera);
	for (cJSON *it = cfg->child; it; it = it->next)
		cJSON_AddNumberToObject(hw, it->string, it->valuedouble);
	cJSON_Delete(cfg);
	uint64_t macs = 0;
	for (int i = 0; i < cm.nk; i++)
		macs += cm.k[i].ki.macs;
	cJSON *p = manifest_program(mf);
	cJSON_AddNumberToObject(p, "kernels", cm.nk);
	cJSON_AddNumberToObject(p, "ocm_peak_bytes", (double)cm.ocm_peak);
	cJSON_AddNumberToObject(p, "gmacs", (double)macs / 1e9);
	if (manifest_add_file(mf, dir, "module.cpp", d) != WL_OK ||
	    manifest_add_file(mf, dir, "weights.bin", d) != WL_OK ||
	    manifest_add_file(mf, dir, "schedule.json", d) != WL_OK)
		goto out;
	rc = manifest_write(mf, dir, d);
	mf = NULL;
out:
	manifest_free(mf);
	ch_free(&cm);
	return rc;
}
