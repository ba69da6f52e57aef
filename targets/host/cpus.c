/* cpus.c — the CPU names --target host accepts for --cpu: LLVM 19's x86
 * processors that run 64-bit code (X86.td), plus "native" (the machine
 * that compiles). LLVM itself only warns on an unknown name, and aborts on
 * a 32-bit one ("64-bit code requested on a subtarget that doesn't support
 * it"), so the driver checks the name here first. */
#include <string.h>
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
