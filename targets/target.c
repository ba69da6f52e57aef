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

ManifestInfo target_manifest_info(const TargetOptions *o)
{
	return (ManifestInfo){.model_path = o->model_path, .target_name = o->target_name,
	                      .fuse = o->fuse, .passes_run = o->passes_run,
	                      .npasses_run = o->npasses_run, .t_start_ms = o->t_start_ms};
}
