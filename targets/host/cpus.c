/* cpus.c — the CPU names --target host accepts for --cpu: LLVM 19's x86
 * processors that run 64-bit code (X86.td), plus "native" (the machine
 * that compiles). LLVM itself only warns on an unknown name, and aborts on
 * a 32-bit one ("64-bit code requested on a subtarget that doesn't support
 * it"), so the driver checks the name here first. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cpuid.h>
#include "hostgen.h"

static const char *const cpus[] = {
	"native",
	/* generic levels */
	"x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4",
	/* Intel */
	"nocona", "core2", "penryn", "bonnell", "atom", "silvermont", "slm", "goldmont", "goldmont-plus",
	"tremont", "nehalem", "corei7", "westmere", "sandybridge", "corei7-avx", "ivybridge", "core-avx-i",
	"haswell", "core-avx2", "broadwell", "skylake", "skylake-avx512", "skx", "cascadelake", "cooperlake",
	"cannonlake", "icelake-client", "rocketlake", "icelake-server", "tigerlake", "sapphirerapids",
	"alderlake", "raptorlake", "meteorlake", "arrowlake", "arrowlake-s", "lunarlake", "gracemont",
	"pantherlake", "sierraforest", "grandridge", "graniterapids", "graniterapids-d", "emeraldrapids",
	"clearwaterforest", "knl", "knm",
	/* AMD */
	"k8", "athlon64", "athlon-fx", "opteron", "k8-sse3", "athlon64-sse3", "opteron-sse3", "amdfam10",
	"barcelona", "btver1", "btver2", "bdver1", "bdver2", "bdver3", "bdver4", "znver1", "znver2", "znver3",
	"znver4", "znver5",
	NULL,
};

bool host_cpu_known(const char *name)
{
	for (int i = 0; cpus[i]; i++)
		if (strcmp(cpus[i], name) == 0)
			return true;
	return false;
}

void host_cpu_list(FILE *f)
{
	int col = 0;
	for (int i = 0; cpus[i]; i++) {
		int n = (int)strlen(cpus[i]);
		if (col > 0 && col + 1 + n > 78) {
			fputc('\n', f);
			col = 0;
		}
		col += fprintf(f, "%s%s", col ? " " : "  ", cpus[i]);
	}
	fputc('\n', f);
}

/* ---------------------------------------------------------------- caches */

/* sysfs "32K" / "1024K" / "32M" → bytes; 0 if unreadable */
static int64_t read_size(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	long long v = 0;
	char unit = 0;
	int r = fscanf(f, "%lld%c", &v, &unit);
	fclose(f);
	if (r < 1 || v <= 0)
		return 0;
	return unit == 'K' ? v * 1024 : unit == 'M' ? v * 1024 * 1024 : v;
}

static bool read_word(const char *path, char *buf, size_t n)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	bool ok = fgets(buf, (int)n, f) != NULL;
	fclose(f);
	if (ok)
		buf[strcspn(buf, "\n")] = 0;
	return ok;
}

/* L1d, L2, L3 of cpu0 from /sys/devices/system/cpu/cpu0/cache/index* */
static bool caches_sysfs(HgCpu *c)
{
	const char *base = getenv("WLOWER_SYSFS_CACHE");   /* tests: a fake cache directory */
	if (!base)
		base = "/sys/devices/system/cpu/cpu0/cache";
	bool any = false;
	for (int i = 0; i < 8; i++) {
		char p[512], type[32], level[8];
		snprintf(p, sizeof p, "%s/index%d/type", base, i);
		if (!read_word(p, type, sizeof type))
			continue;
		snprintf(p, sizeof p, "%s/index%d/level", base, i);
		if (!read_word(p, level, sizeof level))
			continue;
		snprintf(p, sizeof p, "%s/index%d/size", base, i);
		int64_t sz = read_size(p);
		if (sz <= 0 || !strcmp(type, "Instruction"))
			continue;
		if (level[0] == '1')
			c->l1d = sz;
		else if (level[0] == '2')
			c->l2 = sz;
		else if (level[0] == '3')
			c->l3 = sz;
		any = true;
	}
	return any && c->l1d > 0 && c->l2 > 0;
}

/* Where sysfs has no cache directory (some containers and VMs): the
 * deterministic cache parameters of CPUID, leaf 4 (Intel) or 0x8000001D
 * (AMD): size = ways · partitions · line · sets. */
static bool caches_cpuid(HgCpu *c)
{
	const unsigned leaves[2] = {4, 0x8000001Du};
	for (int l = 0; l < 2; l++) {
		unsigned max = __get_cpuid_max(leaves[l] & 0x80000000u, NULL);
		if (max < leaves[l])
			continue;
		bool any = false;
		for (unsigned i = 0; i < 8; i++) {
			unsigned a, b, cx, dx;
			if (!__get_cpuid_count(leaves[l], i, &a, &b, &cx, &dx))
				break;
			unsigned type = a & 0x1f, level = (a >> 5) & 7;
			if (type == 0)
				break;
			int64_t sz = (int64_t)((b >> 22) + 1) * (((b >> 12) & 0x3ff) + 1) * ((b & 0xfff) + 1) * ((int64_t)cx + 1);
			if (type == 2)
				continue;
			if (level == 1)
				c->l1d = sz;
			else if (level == 2)
				c->l2 = sz;
			else if (level == 3)
				c->l3 = sz;
			any = true;
		}
		if (any && c->l1d > 0 && c->l2 > 0)
			return true;
	}
	return false;
}

/* per-core L1d / L2 by CPU name (vendor documentation); others: 32K / 512K */
static const struct {
	const char *name;
	int l1d_k, l2_k;
} cache_table[] = {
	{"skylake-avx512", 32, 1024}, {"skx", 32, 1024}, {"cascadelake", 32, 1024}, {"cooperlake", 32, 1024},
	{"icelake-server", 48, 1280}, {"icelake-client", 48, 512}, {"tigerlake", 48, 1280}, {"rocketlake", 48, 512},
	{"sapphirerapids", 48, 2048}, {"emeraldrapids", 48, 2048}, {"graniterapids", 48, 2048},
	{"graniterapids-d", 48, 2048}, {"alderlake", 48, 1280}, {"raptorlake", 48, 2048}, {"meteorlake", 48, 2048},
	{"arrowlake", 48, 3072}, {"arrowlake-s", 48, 3072}, {"lunarlake", 48, 2560}, {"haswell", 32, 256},
	{"core-avx2", 32, 256}, {"broadwell", 32, 256}, {"skylake", 32, 256}, {"znver1", 32, 512},
	{"znver2", 32, 512}, {"znver3", 32, 512}, {"znver4", 32, 1024}, {"znver5", 48, 1024},
	{"x86-64-v4", 32, 1024}, {NULL, 0, 0},
};

void host_cpu_describe(HgCpu *c, const char *name, bool native)
{
	memset(c, 0, sizeof *c);
	snprintf(c->name, sizeof c->name, "%s", name);
	snprintf(c->model, sizeof c->model, "%s", name);
	c->native = native;
	if (native) {
		FILE *f = fopen("/proc/cpuinfo", "r");
		char line[512];
		while (f && fgets(line, sizeof line, f))
			if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
				const char *v = strchr(line, ':') + 1;
				while (*v == ' ')
					v++;
				snprintf(c->model, sizeof c->model, "%s", v);
				c->model[strcspn(c->model, "\n")] = 0;
				break;
			}
		if (f)
			fclose(f);
		if (caches_sysfs(c)) {
			c->cache_source = "sysfs";
			return;
		}
		if (!getenv("WLOWER_SYSFS_CACHE") && caches_cpuid(c)) {
			c->cache_source = "cpuid";
			return;
		}
	}
	c->l1d = 32 * 1024;
	c->l2 = 512 * 1024;
	c->l3 = 0;
	for (int i = 0; cache_table[i].name; i++)
		if (!strcmp(cache_table[i].name, name)) {
			c->l1d = cache_table[i].l1d_k * 1024;
			c->l2 = cache_table[i].l2_k * 1024;
		}
	c->cache_source = "table";
}
