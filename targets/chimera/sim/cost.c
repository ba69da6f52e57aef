/* cost.c — the cycle model of `wlower sim` (docs/cost-model.md has every
 * formula and constant, and the calibration on the vendor's two points).
 *
 * Per kernel and core, from schedule.json's per-core counts:
 *   compute       k_compute · alu_ops / PEs + launch
 *   mac           k_mac · macs / (PEs · macs_per_pe · util)  (k_mac_attn for
 *                 attention kernels); util = min(1, kernel macs / (tile count
 *                 · m · n · k)): the share of the tiles' MAC slots that hold
 *                 real work (edge tiles are padded); 1 without a tile
 *   data_array    k_array · array_bytes / (4 · links), links = the PE-to-PE
 *                 links pe_rows·(pe_cols−1) + pe_cols·(pe_rows−1) (array_bytes
 *                 counts bytes × hops)
 *   data_ocm      k_ocm · (ocm_read + ocm_write) / (4 · pe_cols)
 *   data_external k_ext · (max(ext_read, ext_write) + act_ddr[class] · act / cores)
 *                 · sharers / (ext_bw / clock); act = the kernel's activation
 *                 bytes (buffers in + out), sharers = cores moving DDR bytes
 *                 or holding activations; k_ext = 1 (nominal bandwidth)
 * A core's kernel time: the sum of its categories (v2: the vendor's
 * categories add up to its total); with overlap (v1), double-buffered tiles
 * take max(on-chip, data_external). A kernel takes the slowest core's time
 * plus kernel_overhead; the module total is the sum over kernels.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "targets/chimera/chimera.h"

const char *const cost_category_names[CAT_COUNT] = {
	"compute", "mac", "data_array", "data_ocm", "data_external",
};

const char *const cost_class_names[COST_CLASS_COUNT] = {"matmul", "attention", "rowwise"};

/* v2: fitted on both vendor points by scripts/fit_cost_model.py (least
 * squares on the relative residuals of the 10 category figures; the script's
 * --check compares this block with its fit). docs/cost-model.md says why each
 * constant exists. */
/* BEGIN fitted (scripts/fit_cost_model.py) */
#define FIT_c_alu 74.572        /* cycles per counted ALU op per PE */
#define FIT_c_launch 22565.3    /* cycles per kernel per core (launch, sync) */
#define FIT_k_mac 1.33212       /* matmul-like: 1 / achieved share of the MAC peak */
#define FIT_k_mac_attn 12.1603  /* attention: the same, QK^T / softmax / PV in turn */
#define FIT_k_array 2.23554     /* 1 / achieved share of the link bandwidth */
#define FIT_k_ocm 1.92545       /* 1 / achieved share of 4 B per PE column per cycle */
#define FIT_a_row 0.940238      /* share of row-wise kernels' activations via DDR */
/* END fitted */

const CostParams cost_default_params = {
	.k = {
		[CAT_COMPUTE] = FIT_c_alu,
		[CAT_MAC] = FIT_k_mac,
		[CAT_DATA_ARRAY] = FIT_k_array,
		[CAT_DATA_OCM] = FIT_k_ocm,
		[CAT_DATA_EXTERNAL] = 1.0,      /* DDR at its nominal bandwidth (not fitted) */
	},
	.k_mac_attn = FIT_k_mac_attn,
	.launch = FIT_c_launch,
	.act_ddr = {[COST_ROWWISE] = FIT_a_row},
	.kernel_overhead = 0,
	.overlap = false,
};

/* v1: one constant per category, fitted on the encoder alone (kept for the
 * comparison in docs/cost-model.md and `--calibrate`). */
const CostParams cost_v1_params = {
	.k = {
		[CAT_COMPUTE] = 78.4396,
		[CAT_MAC] = 5.16933,
		[CAT_DATA_ARRAY] = 2.13135,
		[CAT_DATA_OCM] = 1.94461,
		[CAT_DATA_EXTERNAL] = 1.0,
	},
	.k_mac_attn = 5.16933,
	.launch = 0,
	.act_ddr = {0.440632, 0.440632, 0.440632},
	.kernel_overhead = 11132.7,
	.overlap = true,
};

int cost_kernel_class(const CostKernel *k)
{
	static const char *const attention[] = {"nn::whisperAttention", "nn::gqa", NULL};
	static const char *const matmul[] = {"linalg::matMulNBits", "linalg::qMatMul", "whisper::convStem", "whisper::logMel",
	                                     NULL};
	const char *cpp = k->cpp ? k->cpp : "";
	for (int i = 0; attention[i]; i++)
		if (!strcmp(cpp, attention[i]))
			return COST_ATTENTION;
	for (int i = 0; matmul[i]; i++)
		if (!strcmp(cpp, matmul[i]))
			return COST_MATMUL;
	return COST_ROWWISE;
}

/* Share of the padded tile volume that is real work (docs/cost-model.md). */
double cost_tile_util(const CostKernel *k)
{
	if (k->tile_m <= 0 || k->tile_n <= 0 || k->tile_k <= 0 || k->tile_count <= 0 || !k->macs)
		return 1.0;
	double slots = (double)k->tile_count * (double)k->tile_m * (double)k->tile_n * (double)k->tile_k;
	double u = (double)k->macs / slots;
	return u > 1.0 ? 1.0 : u;
}

void cost_kernel_raw(const ChimeraConfig *cfg, const CostKernel *k, int ci, double raw[CAT_COUNT],
                     double *raw_act)
{
	const CostCoreCounts *c = &k->core[ci];
	double pes = (double)cfg->pe_rows * cfg->pe_cols;
	double util = cost_tile_util(k);
	int sharers = 0;
	for (int i = 0; i < k->ncores; i++)
		if (k->core[i].ext_read || k->core[i].ext_write || k->act_bytes)
			sharers++;
	double bytes_per_cycle = cfg->ext_bw / cfg->clock_hz;
	uint64_t ext = c->ext_read > c->ext_write ? c->ext_read : c->ext_write;

	raw[CAT_COMPUTE] = (double)c->alu_ops / pes;
	raw[CAT_MAC] = (double)c->macs / (pes * cfg->macs_per_pe * util);
	double links = (double)cfg->pe_rows * (cfg->pe_cols - 1) + (double)cfg->pe_cols * (cfg->pe_rows - 1);
	raw[CAT_DATA_ARRAY] = links > 0 ? (double)c->array_bytes / (4.0 * links) : 0.0;
	raw[CAT_DATA_OCM] = (double)(c->ocm_read + c->ocm_write) / (4.0 * cfg->pe_cols);
	raw[CAT_DATA_EXTERNAL] = ext ? (double)ext * sharers / bytes_per_cycle : 0.0;
	*raw_act = k->ncores ? (double)k->act_bytes / k->ncores * sharers / bytes_per_cycle : 0.0;
}

void cost_model(const ChimeraConfig *cfg, const CostParams *p, const CostKernel *ks, int nk,
                CostResult *r)
{
	memset(r, 0, sizeof *r);
	r->nkernels = nk;
	r->cores = cfg->cores < 1 ? 1 : cfg->cores > COST_MAX_CORES ? COST_MAX_CORES : cfg->cores;
	size_t n = nk > 0 ? (size_t)nk : 1;
	r->cyc = calloc(n, sizeof *r->cyc);
	r->ktime = calloc(n, sizeof *r->ktime);
	r->kernel_cycles = calloc(n, sizeof *r->kernel_cycles);
	r->critical = calloc(n, sizeof *r->critical);
	if (!r->cyc || !r->ktime || !r->kernel_cycles || !r->critical)
		wl_die(__FILE__, __LINE__, "out of memory");
	double total = 0;
	for (int i = 0; i < nk; i++) {
		const CostKernel *k = &ks[i];
		int cls = cost_kernel_class(k);
		double kmac = cls == COST_ATTENTION ? p->k_mac_attn : p->k[CAT_MAC];
		double raw_max[CAT_COUNT] = {0}, act_max = 0;
		int crit = k->ncores > 0 ? k->core[0].core : 0;
		double worst = -1;
		for (int c = 0; c < k->ncores; c++) {
			int core = k->core[c].core;
			WL_ASSERT(core >= 0 && core < r->cores);
			double raw[CAT_COUNT], act, *cy = r->cyc[i][core];
			cost_kernel_raw(cfg, k, c, raw, &act);
			for (int t = 0; t < CAT_COUNT; t++) {
				cy[t] = raw[t] * (t == CAT_MAC ? kmac : p->k[t]);
				if (raw[t] > raw_max[t])
					raw_max[t] = raw[t];
			}
			cy[CAT_COMPUTE] += p->launch;
			cy[CAT_DATA_EXTERNAL] += act * p->act_ddr[cls] * p->k[CAT_DATA_EXTERNAL];
			if (act > act_max)
				act_max = act;
			double onchip = cy[CAT_COMPUTE] + cy[CAT_MAC] + cy[CAT_DATA_ARRAY] + cy[CAT_DATA_OCM];
			double ext = cy[CAT_DATA_EXTERNAL];
			double t = p->overlap && k->double_buffered ? (onchip > ext ? onchip : ext) : onchip + ext;
			r->ktime[i][core] = t;
			if (t > worst) {
				worst = t;
				crit = core;
			}
		}
		if (worst < 0)
			worst = 0;
		r->critical[i] = crit;
		r->kernel_cycles[i] = worst + p->kernel_overhead;
		total += r->kernel_cycles[i];
		for (int c = 0; c < r->cores; c++) {
			for (int t = 0; t < CAT_COUNT; t++)
				r->core_cat[c][t] += r->cyc[i][c][t];
			r->core_busy[c] += r->ktime[i][c];
		}
		for (int t = 0; t < CAT_COUNT; t++) {
			r->module_cat[t] += r->cyc[i][crit][t];
			r->raw_module_cat[t] += raw_max[t];
			r->raw_class[cls][t] += raw_max[t];
		}
		r->raw_module_act += act_max;
		r->raw_class_act[cls] += act_max;
		r->class_kernels[cls]++;
		if (k->ncores > 0)
			r->launch_cycles += p->launch;
		r->overhead_cycles += p->kernel_overhead;
	}
	r->total_cycles = (uint64_t)llround(total);
}

void cost_result_free(CostResult *r)
{
	free(r->cyc);
	free(r->ktime);
	free(r->kernel_cycles);
	free(r->critical);
	memset(r, 0, sizeof *r);
}

double cost_model_act_bytes(const CostParams *p, const CostKernel *ks, int nk)
{
	double b = 0;
	for (int i = 0; i < nk; i++)
		b += (double)ks[i].act_bytes * p->act_ddr[cost_kernel_class(&ks[i])];
	return b;
}
