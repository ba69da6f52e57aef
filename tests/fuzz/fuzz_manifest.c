/* fuzz_manifest.c — libFuzzer target for the manifest reader: each input is
 * written as manifest.json into a scratch module directory that also holds a
 * 64-byte weights.bin (and no module.so, so nothing is ever dlopened), then
 * read by the host runtime's wl_open (manifest_read, then every field it
 * checks; WL_OPEN_NO_VERIFY, so a fuzzed size can reach the module.so
 * step) and by module_dir_replaceable (the -o guard).
 * Seeds: tests/fuzz/seed.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "runtime/module/module.h"
#include "runtime/rt/wlower_rt.h"
#include "fuzz_scratch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	if (!ready) {
		uint8_t w[64];
		for (int i = 0; i < 64; i++)
			w[i] = (uint8_t)i;
		fuzz_scratch_file("weights.bin", w, sizeof w);
		ready = 1;
	}
	fuzz_scratch_file("manifest.json", data, size);
	char dir[1024];
	snprintf(dir, sizeof dir, "%s", fuzz_dir);

	char *err = NULL;
	WlModule *m = wl_open_flags(dir, 1, WL_OPEN_NO_VERIFY, &err);
	if (m) {
		fprintf(stderr, "wl_open accepted a directory without module.so\n");
		abort();
	}
	if (!err || !*err)
		abort(); /* an error without a message */
	if (strchr(err, '\n')) {
		fprintf(stderr, "wl_open error is not one line: %s\n", err);
		abort();
	}
	free(err);

	char why[512];
	(void)module_dir_replaceable(dir, why, sizeof why);
	return 0;
}
