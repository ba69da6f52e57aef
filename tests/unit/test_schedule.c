/* test_schedule.c — schedule.json (runtime/module/schedule.c): a written
 * Schedule reads back whole and writes the same bytes again; out-of-range
 * numbers are one-line errors naming the file and the key. */
#include <check.h>
#include "check_run.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "runtime/module/module.h"

static char *tmpdir(void)
{
	char tmpl[] = "/tmp/wl-schedule-XXXXXX";
	char *d = mkdtemp(tmpl);
	ck_assert_ptr_nonnull(d);
	return strdup(d);
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	ck_assert_ptr_nonnull(f);
	static char buf[1 << 16];
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	return strdup(buf);
}

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "wb");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

static Schedule sample(int cores[2], SchedBuffer bufs[2], SchedDma dma[2], SchedSpill *sp, SchedKernel *k)
{
	cores[0] = 0, cores[1] = 1;
	bufs[0] = (SchedBuffer){.value = "x", .role = "in", .mem = "ocm", .offset = 64, .bytes = 128};
	bufs[1] = (SchedBuffer){.value = "n#weight", .role = "weight", .mem = "ddr", .in_place = "weights.bin",
	                        .bytes = 4096};
	dma[0] = (SchedDma){.dir = SCHED_DDR_TO_OCM, .bytes = 512, .what = "weights"};
	dma[1] = (SchedDma){.dir = SCHED_LRM_TO_OCM, .bytes = 77, .what = "activations"};
	*sp = (SchedSpill){.value = "big", .bytes = 1 << 20, .reason = "does not fit in OCM"};
	*k = (SchedKernel){.fn = "k0", .name = "n", .op = "MatMul", .cpp = "linalg::matMul", .split = "rows",
	                   .cores = cores, .ncores = 2, .macs = 1000, .alu_ops = 10, .has_tile = true,
	                   .tile = {.m = 16, .n = 16, .k = 16, .count = 4, .lrm_bytes = 4096, .double_buffered = true},
	                   .buffers = bufs, .nbuffers = 2, .dma = dma, .ndma = 2, .nper_core = 2};
	k->per_core[0] = (SchedCore){.core = 0, .macs = 600, .alu_ops = 6, .ext_read = 3};
	k->per_core[1] = (SchedCore){.core = 1, .macs = 400, .alu_ops = 4, .ocm_write = 9};
	Schedule s = {.target = "qc-p", .ocm_peak_bytes = 4096, .lrm_peak_bytes = 1024, .ddr_bytes = 1 << 20,
	              .weights_bytes = 4096, .spills = sp, .nspills = 1, .kernels = k, .nkernels = 1};
	s.config = (ChimeraConfig){.cores = 2, .pe_rows = 16, .pe_cols = 16, .macs_per_pe = 16, .lrm_bytes = 4096,
	                           .ocm_bytes = 16 << 20, .clock_hz = 1.7e9, .ext_bw = 128e9};
	return s;
}

/* Writes the sample to DIR/schedule.json in a new DIR (returned; free it). */
static char *write_sample(char path[512])
{
	int cores[2];
	SchedBuffer bufs[2];
	SchedDma dma[2];
	SchedSpill sp;
	SchedKernel k;
	Schedule s = sample(cores, bufs, dma, &sp, &k);
	char *dir = tmpdir();
	snprintf(path, 512, "%s/schedule.json", dir);
	Diag d = {0};
	ck_assert_int_eq(schedule_write(path, &s, &d), WL_OK);
	return dir;
}

START_TEST(test_round_trip)
{
	char path[512], *dir = write_sample(path);
	Diag d = {0};
	char *first = slurp(path);
	Schedule r;
	ck_assert_int_eq(schedule_read(dir, &r, &d), WL_OK);
	ck_assert_str_eq(r.target, "qc-p");
	ck_assert_int_eq(r.config.cores, 2);
	ck_assert_int_eq(r.nkernels, 1);
	ck_assert_int_eq(r.kernels[0].nper_core, 2);
	ck_assert_int_eq(r.kernels[0].dma[1].dir, SCHED_LRM_TO_OCM);
	ck_assert_str_eq(r.kernels[0].buffers[1].in_place, "weights.bin");
	ck_assert_ptr_null(r.kernels[0].buffers[0].in_place);
	ck_assert_uint_eq(r.kernels[0].tile.lrm_bytes, 4096);
	ck_assert_int_eq(r.nspills, 1);
	ck_assert_str_eq(r.spills[0].value, "big");
	ck_assert_int_eq(schedule_write(path, &r, &d), WL_OK);
	char *second = slurp(path);
	ck_assert_str_eq(first, second);
	schedule_free(&r);
	ck_assert_ptr_null(r.arena);
	free(first);
	free(second);
	unlink(path);
	rmdir(dir);
	free(dir);
}
END_TEST

/* ocm_peak_bytes replaced by TEXT: WL_OK, or the message after "DIR/schedule.json: " */
static void check_peak(const char *text, const char *want)
{
	char path[512], *dir = write_sample(path);
	Diag d = {0};
	char *txt = slurp(path), *at = strstr(txt, "\"ocm_peak_bytes\":\t4096");
	ck_assert_ptr_nonnull(at);
	char edited[1 << 16];
	snprintf(edited, sizeof edited, "%.*s\"ocm_peak_bytes\": %s%s", (int)(at - txt), txt, text,
	         at + strlen("\"ocm_peak_bytes\":\t4096"));
	put(path, edited);
	Schedule r;
	int rc = schedule_read(dir, &r, &d);
	if (!want) {
		ck_assert_msg(rc == WL_OK, "%s: %s", text, d.msg);
		schedule_free(&r);
	} else {
		char full[1024];
		snprintf(full, sizeof full, "%s: %s", path, want);
		ck_assert_int_eq(rc, WL_ERR);
		ck_assert_str_eq(d.msg, full);
		ck_assert_ptr_null(r.arena);
	}
	free(txt);
	unlink(path);
	rmdir(dir);
	free(dir);
}

START_TEST(test_u64_range)
{
	check_peak("9223372036854775808", NULL);     /* 2^63 */
	check_peak("0", NULL);
	check_peak("1e400", "schedule: 'ocm_peak_bytes' is not a non-negative integer");
	check_peak("-1e400", "schedule: 'ocm_peak_bytes' is not a non-negative integer");
	check_peak("-1", "schedule: 'ocm_peak_bytes' is not a non-negative integer");
	check_peak("2.5", "schedule: 'ocm_peak_bytes' is not a non-negative integer");
	check_peak("18446744073709551616", "schedule: 'ocm_peak_bytes' is out of range (above 2^63)");
	check_peak("1e30", "schedule: 'ocm_peak_bytes' is out of range (above 2^63)");
}
END_TEST

CHECK_MAIN("schedule", "schedule", test_round_trip, test_u64_range)
