/* schedule.h — schedule.json of a Chimera module directory (runtime/module/
 * schedule.c): the one definition its writer (targets/chimera/emit_cpp.c)
 * and its reader (targets/chimera/sim/sim.c) share. The schema is in
 * docs/FORMATS.md; a Schedule holds everything the file holds, in file order:
 *
 * {"format": "wlower-schedule", "version": 1, "target": T, "config": CONFIG,
 *  "ocm_peak_bytes": N, "lrm_peak_bytes": N, "ddr_bytes": N, "weights_bytes": N,
 *  "spills": [{"value", "bytes", "reason"}],
 *  "kernels": [{"id": index, "fn", "name", "op", "cpp", "split", "cores": [...],
 *               "macs", "alu_ops",
 *               "tile": {"m", "n", "k", "count", "lrm_bytes", "double_buffered"},
 *               "buffers": [{"value", "role", "mem", "in_place"?, "offset", "bytes"}],
 *               "dma": [{"dir", "bytes", "what"}],
 *               "per_core": [{"core", "macs", "alu_ops", "array_bytes", "ocm_read",
 *                             "ocm_write", "ext_read", "ext_write"}]}]}
 * CONFIG = chimera_config_json (also the manifest's "hardware" object).
 */
#ifndef WLOWER_SCHEDULE_H
#define WLOWER_SCHEDULE_H

#include <cjson/cJSON.h>
#include "compiler/ir/ir.h"

/* The Chimera hardware a module is compiled for (targets/target.c has the
 * presets; the driver fills it from the command line). */
typedef struct ChimeraConfig {
	int cores;              /* --cores 1..4 (default 4) */
	int pe_rows, pe_cols;   /* preset: 8x8 QC-N, 16x16 QC-P, 32x32 QC-U */
	int macs_per_pe;        /* --macs-per-pe (default 16) */
	uint64_t lrm_bytes;     /* per PE, 4096 */
	uint64_t ocm_bytes;     /* --ocm (default 16 MB = 16 << 20) */
	double clock_hz;        /* --clock (default 1.7e9) */
	double ext_bw;          /* --ext-bw, bytes/s (default 128e9), read and write each */
} ChimeraConfig;

/* {"cores", "pe_rows", "pe_cols", "macs_per_pe", "lrm_bytes", "ocm_bytes",
 * "clock_hz", "ext_bw"}: schedule.json's "config" and the manifest's "hardware". */
cJSON *chimera_config_json(const ChimeraConfig *cfg);

enum { SCHEDULE_MAX_CORES = 4 };   /* config.cores 1..4; per_core entries <= cores */

typedef struct SchedSpill {
	const char *value;      /* the value that did not fit */
	uint64_t bytes;
	const char *reason;     /* "does not fit in OCM" */
} SchedSpill;

typedef struct SchedTile {
	int64_t m, n, k, count;
	uint64_t lrm_bytes;
	bool double_buffered;
} SchedTile;

typedef struct SchedBuffer {
	const char *value;      /* value name, or "NODE#role" for blobs/scratch */
	const char *role;       /* "in" "out" "weight" "scratch" */
	const char *mem;        /* "ocm" "ddr" */
	const char *in_place;   /* "weights.bin" or NULL (key absent) */
	uint64_t offset, bytes;
} SchedBuffer;

typedef enum SchedDmaDir {
	SCHED_DDR_TO_OCM, SCHED_OCM_TO_DDR, SCHED_OCM_TO_LRM, SCHED_LRM_TO_OCM
} SchedDmaDir;
extern const char *const sched_dma_dir_names[4];   /* "ddr_to_ocm" ... */

typedef struct SchedDma {
	SchedDmaDir dir;
	uint64_t bytes;
	const char *what;       /* "weights" "activations" "spill" "fill" */
} SchedDma;

typedef struct SchedCore {
	int core;
	uint64_t macs, alu_ops, array_bytes, ocm_read, ocm_write, ext_read, ext_write;
} SchedCore;

typedef struct SchedKernel {            /* "id" is its index in Schedule.kernels */
	const char *fn, *name, *op, *cpp, *split;
	int *cores; int ncores;             /* "cores" as listed */
	uint64_t macs, alu_ops;
	bool has_tile;                      /* "tile" present */
	SchedTile tile;
	SchedBuffer *buffers; int nbuffers;
	SchedDma *dma; int ndma;
	SchedCore per_core[SCHEDULE_MAX_CORES]; int nper_core;
} SchedKernel;

typedef struct Schedule {
	const char *target;                 /* "qc-p" ... */
	ChimeraConfig config;
	uint64_t ocm_peak_bytes, lrm_peak_bytes, ddr_bytes, weights_bytes;
	SchedSpill *spills; int nspills;
	SchedKernel *kernels; int nkernels;
	Arena *arena;                       /* schedule_read's storage (NULL when the caller filled it) */
} Schedule;

/* Writes s as PATH (pretty-printed, atomically: json_write_atomic).
 * The strings are the caller's; NULL strings are written as "". */
int schedule_write(const char *path, const Schedule *s, Diag *d);

/* Parses DIR/schedule.json into *s (zeroed first; every string and array
 * lives in s->arena). Checks format and version, the config (ranges), every
 * number the simulator uses (non-negative integers up to 2^63; clock_hz and
 * ext_bw positive), DMA directions, per_core (cores in range, listed once,
 * their MACs summing to the kernel's). One-line errors name the file and the
 * key ("out/schedule.json: kernel 'x': missing 'macs'"). Keys no check covers
 * (fn, cores, tile.lrm_bytes, buffer offsets, spills...) are taken when
 * well-formed and left 0/NULL otherwise. On error *s is freed again. */
int schedule_read(const char *dir, Schedule *s, Diag *d);
/* Frees what schedule_read allocated; zeroes *s. */
void schedule_free(Schedule *s);

/* o[k] as a non-negative integer <= 2^63. Absent: *out = 0, and an error
 * "FILE: WHERE: missing 'K'" if req. Not a finite non-negative integer, or
 * above 2^63: "FILE: WHERE: 'K' is not a non-negative integer" /
 * "... 'K' is out of range (above 2^63)". (Also for counters.json.) */
int json_u64(const char *file, const char *where, const cJSON *o, const char *k, bool req,
             uint64_t *out, Diag *d);

#endif
