/* runner.cpp — the simulated binary's main (API.md, docs/chimera-contracts.md "Runner"):
 *
 *   module_sim DIR --input NAME=F.raw ... --output-dir OUT --counters FILE.json [--progress]
 *   module_sim --describe          (the io table, one line per io: in|out NAME DTYPE NDIM DIMS...)
 *   module_sim DIR --serve         (runs on request, one process for many runs: below)
 *
 * mmaps DIR/weights.bin (its size must equal weights_bytes), allocates OCM
 * and DDR, reads each input: raw little-endian bytes of the input's dtype and
 * shape, written by `wlower sim` after its .npy reader checked the file (the
 * size must be exact; float32 inputs are quantized to the input's format:
 * round half up, saturating; NaN becomes 0, ±Inf saturates), runs the
 * kernels in order, writes each output as OUT/NAME.npy ('/' and ':' in names
 * become '_'; fixed point → float32 v/2^F, binary16 → float32, ints as they
 * are) and the counters JSON (per kernel also "saturated": stores clipped at
 * int32, i.e. values outside their calibrated format; noted on stderr). Bad
 * input: one line on stderr, exit 1.
 *
 * --serve (the pipelines' "qc" runner, targets/chimera/sim/session.c): after
 * the weights and memories are set up, each request on stdin is every input
 * in table order as its raw bytes (as the files above); the reply on stdout
 * is, per kernel, five little-endian uint64 (macs, alu_ops, ddr_to_ocm,
 * ocm_to_ddr, saturated), then every output in table order as its .npy
 * would hold it (float32 for dtype float32, else the dtype's bytes). OCM and
 * DDR are zeroed before each run, so every run is bit-exactly the one-shot
 * run on the same inputs. EOF at a request boundary: exit 0. */
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "ccl.hpp"

namespace {

[[noreturn]] void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	std::fprintf(stderr, "module_sim: ");
	std::vfprintf(stderr, fmt, ap);
	std::fprintf(stderr, "\n");
	va_end(ap);
	std::exit(1);
}

/* An input as `wlower sim` hands it over (targets/chimera/sim/sim.c): the
 * raw little-endian bytes of the input's dtype and shape, already read and
 * checked by the one .npy reader (runtime/interp/npy.c). The runner has no
 * .npy parser; it checks only that the size is exact. */
std::vector<uint8_t> read_raw(const std::string &path, size_t want, const char *name)
{
	int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		die("%s: cannot open: %s", path.c_str(), std::strerror(errno));
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
		die("%s: not a regular file", path.c_str());
	if ((unsigned long long)st.st_size != (unsigned long long)want)
		die("%s: input '%s': %lld bytes, expected %zu", path.c_str(), name, (long long)st.st_size, want);
	std::vector<uint8_t> b(want);
	size_t got = 0;
	while (got < want) {
		ssize_t n = read(fd, b.data() + got, want - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			die("%s: cannot read: %s", path.c_str(), n < 0 ? std::strerror(errno) : "short file");
		got += (size_t)n;
	}
	close(fd);
	return b;
}

void npy_write(const std::string &path, const char *descr, const long long *shape, int ndim, const void *data,
               size_t bytes)
{
	std::string h = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (";
	for (int i = 0; i < ndim; i++)
		h += std::to_string(shape[i]) + (ndim == 1 || i + 1 < ndim ? ", " : "");
	if (ndim == 1)
		h.resize(h.size() - 1);
	h += "), }";
	size_t tot = 10 + h.size() + 1;
	h.append((64 - tot % 64) % 64, ' ');
	h += '\n';
	std::string tmp = path + ".tmp";
	FILE *f = std::fopen(tmp.c_str(), "wb");
	if (!f)
		die("%s: cannot write: %s", path.c_str(), std::strerror(errno));
	unsigned char hdr[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(h.size() & 255),
	                         (unsigned char)(h.size() >> 8)};
	bool ok = std::fwrite(hdr, 1, 10, f) == 10 && std::fwrite(h.data(), 1, h.size(), f) == h.size() &&
	          std::fwrite(data, 1, bytes, f) == bytes && std::fflush(f) == 0 && fsync(fileno(f)) == 0;
	int e = errno;
	ok = (std::fclose(f) == 0) && ok;
	if (ok && std::rename(tmp.c_str(), path.c_str()) == 0)
		return;
	e = e ? e : errno;
	unlink(tmp.c_str());
	die("%s: cannot write: %s", path.c_str(), std::strerror(e ? e : EIO));
}

const char *npy_descr(const char *dtype)
{
	if (!std::strcmp(dtype, "float32"))
		return "<f4";
	if (!std::strcmp(dtype, "int64"))
		return "<i8";
	if (!std::strcmp(dtype, "int32"))
		return "<i4";
	if (!std::strcmp(dtype, "float16"))
		return "<f2";
	if (!std::strcmp(dtype, "int8"))
		return "|i1";
	if (!std::strcmp(dtype, "uint8"))
		return "|u1";
	return nullptr;
}

long long io_numel(const ccl::IO &io)
{
	long long n = 1;
	for (int i = 0; i < io.ndim; i++)
		n *= io.shape[i];
	return n;
}

uint8_t *io_ptr(ccl::Ctx &c, const ccl::IO &io)
{
	return (io.mem == ccl::MEM_OCM ? c.ocm : c.ddr) + io.off;
}

std::string safe_name(const char *n)
{
	std::string s(n);
	for (char &ch : s)
		if (ch == '/' || ch == ':')
			ch = '_';
	return s;
}

void json_str(FILE *f, const char *s)
{
	std::fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			std::fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			std::fprintf(f, "\\u%04x", *s);
		else
			std::fputc(*s, f);
	}
	std::fputc('"', f);
}

size_t dtype_size(const char *dtype)
{
	return !std::strcmp(dtype, "int64") ? 8 : !std::strcmp(dtype, "float16") ? 2
	     : !std::strcmp(dtype, "int8") || !std::strcmp(dtype, "uint8") ? 1 : 4;
}

/* Input io from its raw bytes (dtype of io): float32 quantized to io.fmt. */
void store_input(ccl::Ctx &c, const ccl::IO &io, const uint8_t *raw)
{
	long long ne = io_numel(io);
	uint8_t *dst = io_ptr(c, io);
	if (!std::strcmp(io.dtype, "float32")) {
		const float *src = (const float *)raw;
		for (long long i = 0; i < ne; i++) {
			float f;
			std::memcpy(&f, src + i, 4);
			if (ccl::isFixed(io.fmt))
				((int32_t *)dst)[i] = ccl::sat32(ccl::f32_to_fixed64(f, io.fmt));
			else if (io.fmt == ccl::FP16)
				((uint16_t *)dst)[i] = ccl::float_to_fp16(f);
			else
				((float *)dst)[i] = f;
		}
	} else {
		std::memcpy(dst, raw, (size_t)ne * dtype_size(io.dtype));
	}
}

/* Output io as its .npy holds it: float32 (fixed point v/2^F, binary16
 * widened) for dtype float32, else the dtype's bytes. */
std::vector<uint8_t> load_output(ccl::Ctx &c, const ccl::IO &io)
{
	long long ne = io_numel(io);
	const uint8_t *src = io_ptr(c, io);
	if (std::strcmp(io.dtype, "float32")) {
		if (!npy_descr(io.dtype))
			die("output '%s': unsupported dtype %s", io.name, io.dtype);
		return std::vector<uint8_t>(src, src + (size_t)ne * dtype_size(io.dtype));
	}
	std::vector<uint8_t> out((size_t)ne * 4);
	float *v = (float *)out.data();
	for (long long j = 0; j < ne; j++) {
		if (ccl::isFixed(io.fmt))
			v[j] = (float)std::ldexp((double)((const int32_t *)src)[j], -io.fmt);
		else if (io.fmt == ccl::FP16)
			v[j] = ccl::fp16_to_float(((const uint16_t *)src)[j]);
		else
			std::memcpy(&v[j], src + 4 * j, 4);
	}
	return out;
}

} // namespace

/* module_sim --describe: the module's own io table, one line per io:
 *   in|out NAME DTYPE NDIM D0 D1 ...
 * (wlower sim checks manifest.json against it before running). */
static int describe(const ccl::Program &P)
{
	for (int k = 0; k < 2; k++) {
		int n = k ? P.noutputs : P.ninputs;
		const ccl::IO *io = k ? P.outputs : P.inputs;
		for (int i = 0; i < n; i++) {
			std::printf("%s %s %s %d", k ? "out" : "in", io[i].name, io[i].dtype, io[i].ndim);
			for (int j = 0; j < io[i].ndim; j++)
				std::printf(" %lld", io[i].shape[j]);
			std::printf("\n");
		}
	}
	return std::fflush(stdout) == 0 && !std::ferror(stdout) ? 0 : 1;
}

/* Reads exactly n bytes from fd 0; false on EOF before the first byte
 * (when at_start), dies on a short read or an error. */
static bool read_all(uint8_t *p, size_t n, bool at_start)
{
	size_t got = 0;
	while (got < n) {
		ssize_t k = read(0, p + got, n - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k == 0 && got == 0 && at_start)
			return false;
		if (k <= 0)
			die("--serve: stdin: %s", k < 0 ? std::strerror(errno) : "a request ended early");
		got += (size_t)k;
	}
	return true;
}

static void write_all(const void *p, size_t n)
{
	const uint8_t *b = (const uint8_t *)p;
	while (n) {
		ssize_t k = write(1, b, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			die("--serve: stdout: %s", std::strerror(errno));
		b += k;
		n -= (size_t)k;
	}
}

/* module_sim DIR --serve: see the top of the file. */
static int serve_loop(const ccl::Program &P, ccl::Ctx &c, std::vector<uint8_t> &ocm, std::vector<uint8_t> &ddr)
{
	if (P.ninputs == 0)
		die("--serve: the module has no inputs (a request would be empty)");
	std::vector<std::vector<uint8_t>> raw((size_t)P.ninputs);
	for (int i = 0; i < P.ninputs; i++) {
		if (!npy_descr(P.inputs[i].dtype))
			die("input '%s': unsupported dtype %s", P.inputs[i].name, P.inputs[i].dtype);
		raw[i].resize((size_t)io_numel(P.inputs[i]) * dtype_size(P.inputs[i].dtype));
	}
	std::vector<unsigned long long> cnt((size_t)P.nkernels * 5);
	for (;;) {
		for (int i = 0; i < P.ninputs; i++)
			if (!read_all(raw[i].data(), raw[i].size(), i == 0))
				return 0;
		std::memset(ocm.data(), 0, ocm.size());
		std::memset(ddr.data(), 0, ddr.size());
		for (int i = 0; i < P.ninputs; i++)
			store_input(c, P.inputs[i], raw[i].data());
		for (int k = 0; k < P.nkernels; k++) {
			c.macs = c.alu = c.ddr_to_ocm = c.ocm_to_ddr = 0;
			unsigned long long sat0 = ccl::saturated_stores.load();
			P.kernels[k].fn(c);
			unsigned long long *q = &cnt[(size_t)k * 5];
			q[0] = c.macs, q[1] = c.alu, q[2] = c.ddr_to_ocm, q[3] = c.ocm_to_ddr;
			q[4] = ccl::saturated_stores.load() - sat0;
		}
		write_all(cnt.data(), cnt.size() * sizeof cnt[0]);
		for (int i = 0; i < P.noutputs; i++) {
			std::vector<uint8_t> v = load_output(c, P.outputs[i]);
			write_all(v.data(), v.size());
		}
	}
}

int main(int argc, char **argv)
{
	const ccl::Program &P = wl_program;
	if (argc == 2 && std::strcmp(argv[1], "--describe") == 0)
		return describe(P);
	std::string dir, outdir, counters;
	bool progress = false, serve = false;
	std::vector<std::pair<std::string, std::string>> inputs;
	for (int i = 1; i < argc; i++) {
		std::string a = argv[i];
		auto next = [&]() -> std::string {
			if (i + 1 >= argc)
				die("%s needs an argument", a.c_str());
			return argv[++i];
		};
		if (a == "--input") {
			std::string v = next();
			size_t eq = v.find('=');
			if (eq == std::string::npos || eq == 0)
				die("--input %s: expected NAME=FILE.raw", v.c_str());
			inputs.emplace_back(v.substr(0, eq), v.substr(eq + 1));
		} else if (a == "--output-dir") {
			outdir = next();
		} else if (a == "--counters") {
			counters = next();
		} else if (a == "--progress") {
			progress = true;
		} else if (a == "--serve") {
			serve = true;
		} else if (!a.empty() && a[0] == '-') {
			die("unknown option %s", a.c_str());
		} else if (dir.empty()) {
			dir = a;
		} else {
			die("unexpected argument %s", a.c_str());
		}
	}
	if (dir.empty() || (outdir.empty() && !serve) || (serve && (!inputs.empty() || !outdir.empty())))
		die("usage: module_sim DIR --input NAME=F.raw ... --output-dir OUT [--counters F.json] [--progress] | DIR --serve");

	/* weights */
	std::string wpath = dir + "/weights.bin";
	const uint8_t *wmap = nullptr;
	std::vector<uint8_t> wempty(64);
	{
		int fd = open(wpath.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0)
			die("%s: cannot open: %s", wpath.c_str(), std::strerror(errno));
		struct stat st;
		if (fstat(fd, &st) != 0)
			die("%s: cannot stat", wpath.c_str());
		if (!S_ISREG(st.st_mode))
			die("%s: not a regular file", wpath.c_str());
		if ((unsigned long long)st.st_size != P.weights_bytes)
			die("%s: %lld bytes, the module expects %llu", wpath.c_str(), (long long)st.st_size, P.weights_bytes);
		if (st.st_size > 0) {
			void *m = mmap(nullptr, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
			if (m == MAP_FAILED)
				die("%s: mmap failed: %s", wpath.c_str(), std::strerror(errno));
			wmap = (const uint8_t *)m;
		} else {
			wmap = wempty.data();
		}
		close(fd);
	}
	ccl::Ctx c{};
	std::vector<uint8_t> ocm((size_t)P.ocm_bytes + 64), ddr((size_t)P.ddr_bytes + 64);
	c.ocm = ocm.data();
	c.ddr = ddr.data();
	c.w = wmap;
	if (serve)
		return serve_loop(P, c, ocm, ddr);

	/* inputs */
	unsigned long long in_bytes = 0, out_bytes = 0;
	std::vector<bool> seen((size_t)P.ninputs);
	for (auto &kv : inputs) {
		int idx = -1;
		for (int i = 0; i < P.ninputs; i++)
			if (kv.first == P.inputs[i].name)
				idx = i;
		if (idx < 0)
			die("--input %s: the module has no input named '%s'", kv.first.c_str(), kv.first.c_str());
		if (seen[idx])
			die("--input %s: given twice", kv.first.c_str());
		seen[idx] = true;
		const ccl::IO &io = P.inputs[idx];
		if (!npy_descr(io.dtype))
			die("input '%s': unsupported dtype %s", io.name, io.dtype);
		std::vector<uint8_t> raw = read_raw(kv.second, (size_t)io_numel(io) * dtype_size(io.dtype), io.name);
		store_input(c, io, raw.data());
		in_bytes += io.bytes;
	}
	for (int i = 0; i < P.ninputs; i++)
		if (!seen[i])
			die("missing --input %s=FILE.raw", P.inputs[i].name);

	/* run */
	struct Cnt { unsigned long long macs, alu, d2o, o2d, sat; };
	std::vector<Cnt> cnt((size_t)P.nkernels);
	for (int k = 0; k < P.nkernels; k++) {
		c.macs = c.alu = c.ddr_to_ocm = c.ocm_to_ddr = 0;
		unsigned long long sat0 = ccl::saturated_stores.load();
		P.kernels[k].fn(c);
		cnt[k] = {c.macs, c.alu, c.ddr_to_ocm, c.ocm_to_ddr, ccl::saturated_stores.load() - sat0};
		if (progress) {
			std::printf("progress %d %d\n", k + 1, P.nkernels);
			std::fflush(stdout);
		}
	}

	/* outputs */
	for (int i = 0; i < P.noutputs; i++) {
		const ccl::IO &io = P.outputs[i];
		std::string path = outdir + "/" + safe_name(io.name) + ".npy";
		std::vector<uint8_t> v = load_output(c, io);
		npy_write(path, std::strcmp(io.dtype, "float32") ? npy_descr(io.dtype) : "<f4", io.shape, io.ndim, v.data(),
		          v.size());
		out_bytes += io.bytes;
	}

	if (!counters.empty()) {
		std::string tmp = counters + ".tmp";
		FILE *f = std::fopen(tmp.c_str(), "w");
		if (!f)
			die("%s: cannot write: %s", counters.c_str(), std::strerror(errno));
		std::fprintf(f, "{\"kernels\":[");
		for (int k = 0; k < P.nkernels; k++) {
			std::fprintf(f, "%s{\"name\":", k ? "," : "");
			json_str(f, P.kernels[k].name);
			std::fprintf(f, ",\"op\":");
			json_str(f, P.kernels[k].op);
			std::fprintf(f, ",\"macs\":%llu,\"alu_ops\":%llu,\"ddr_to_ocm\":%llu,\"ocm_to_ddr\":%llu,\"saturated\":%llu}",
			             cnt[k].macs, cnt[k].alu, cnt[k].d2o, cnt[k].o2d, cnt[k].sat);
		}
		std::fprintf(f, "],\"input_bytes\":%llu,\"output_bytes\":%llu}\n", in_bytes, out_bytes);
		bool ok = std::fflush(f) == 0 && !std::ferror(f) && fsync(fileno(f)) == 0;
		int e = errno;
		ok = std::fclose(f) == 0 && ok;
		if (!ok || std::rename(tmp.c_str(), counters.c_str()) != 0) {
			e = e ? e : errno;
			unlink(tmp.c_str());
			die("%s: cannot write: %s", counters.c_str(), std::strerror(e ? e : EIO));
		}
	}
	return 0;
}
