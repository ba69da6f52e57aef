// Test fixture: a minimal module_sim runner (raw float32 in, .npy out, fixed-point
// or float32 formats) following the runner contract of the CCL library.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include "ccl.hpp"

static void die(const std::string &m) { fprintf(stderr, "module_sim: %s\n", m.c_str()); exit(1); }

// An input as wlower sim hands it over: raw float32 bytes, exact size.
static std::vector<float> read_raw(const std::string &path, long long n)
{
	FILE *f = fopen(path.c_str(), "rb");
	if (!f) die(path + ": cannot open");
	std::vector<float> v(n + 1);
	if (fread(v.data(), 4, n + 1, f) != (size_t)n) die(path + ": wrong number of elements");
	fclose(f);
	v.resize(n);
	return v;
}

static void write_npy(const std::string &path, const float *v, const ccl::IO &io)
{
	std::string shape = "(";
	for (int i = 0; i < io.ndim; i++) shape += std::to_string(io.shape[i]) + (io.ndim == 1 || i + 1 < io.ndim ? "," : "");
	shape += ")";
	std::string h = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
	while ((10 + h.size() + 1) % 64) h += ' ';
	h += '\n';
	FILE *f = fopen(path.c_str(), "wb");
	if (!f) die(path + ": cannot write");
	unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(h.size() & 255), (unsigned char)(h.size() >> 8)};
	long long n = io.bytes / 4;
	bool ok = fwrite(pre, 1, 10, f) == 10 && fwrite(h.data(), 1, h.size(), f) == h.size() &&
	          fwrite(v, 4, n, f) == (size_t)n && fflush(f) == 0;
	int e = errno;
	if (fclose(f) != 0 || !ok) die(path + ": cannot write: " + strerror(e ? e : errno));
}

int main(int argc, char **argv)
{
	const ccl::Program &p = wl_program;
	if (argc == 2 && std::string(argv[1]) == "--describe") {   /* the io table, as the real runner */
		for (int k = 0; k < 2; k++)
			for (int i = 0; i < (k ? p.noutputs : p.ninputs); i++) {
				const ccl::IO &io = k ? p.outputs[i] : p.inputs[i];
				std::printf("%s %s %s %d", k ? "out" : "in", io.name, io.dtype, io.ndim);
				for (int j = 0; j < io.ndim; j++)
					std::printf(" %lld", io.shape[j]);
				std::printf("\n");
			}
		return 0;
	}
	std::string dir, out, counters;
	std::vector<std::pair<std::string, std::string>> ins;
	bool progress = false;
	for (int i = 1; i < argc; i++) {
		std::string a = argv[i];
		if (a == "--input" && i + 1 < argc) {
			std::string b = argv[++i];
			size_t e = b.find('=');
			ins.push_back({b.substr(0, e), b.substr(e + 1)});
		} else if (a == "--output-dir" && i + 1 < argc) out = argv[++i];
		else if (a == "--counters" && i + 1 < argc) counters = argv[++i];
		else if (a == "--progress") progress = true;
		else dir = a;
	}
	std::vector<uint8_t> w(p.weights_bytes + 1), ocm(p.ocm_bytes + 1), ddr(p.ddr_bytes + 1);
	FILE *wf = fopen((dir + "/weights.bin").c_str(), "rb");
	if (!wf || fread(w.data(), 1, p.weights_bytes, wf) != p.weights_bytes) die(dir + "/weights.bin: wrong size");
	fclose(wf);
	ccl::Ctx c{ocm.data(), ddr.data(), w.data(), 0, 0, 0, 0};
	for (int i = 0; i < p.ninputs; i++) {
		const ccl::IO &io = p.inputs[i];
		std::string file;
		for (auto &b : ins) if (b.first == io.name) file = b.second;
		if (file.empty()) die(std::string("input '") + io.name + "' not given");
		std::vector<float> v = read_raw(file, io.bytes / 4);
		uint8_t *base = (io.mem == ccl::MEM_OCM ? c.ocm : c.ddr) + io.off;
		for (size_t k = 0; k < v.size(); k++) {
			if (io.fmt == ccl::F32) { memcpy(base + 4 * k, &v[k], 4); continue; }
			double q = std::floor((double)v[k] * std::ldexp(1.0, io.fmt) + 0.5);
			q = q > 2147483647.0 ? 2147483647.0 : q < -2147483648.0 ? -2147483648.0 : q;
			int32_t x = (int32_t)q;
			memcpy(base + 4 * k, &x, 4);
		}
	}
	std::string js = "{\"kernels\":[";
	for (int k = 0; k < p.nkernels; k++) {
		c.macs = c.alu = c.ddr_to_ocm = c.ocm_to_ddr = 0;
		p.kernels[k].fn(c);
		char buf[512];
		snprintf(buf, sizeof buf, "%s{\"name\":\"%s\",\"op\":\"%s\",\"macs\":%llu,\"alu_ops\":%llu,\"ddr_to_ocm\":%llu,\"ocm_to_ddr\":%llu}",
		         k ? "," : "", p.kernels[k].name, p.kernels[k].op, c.macs, c.alu, c.ddr_to_ocm, c.ocm_to_ddr);
		js += buf;
		if (progress) { printf("progress %d %d\n", k + 1, p.nkernels); fflush(stdout); }
	}
	js += "],\"input_bytes\":0,\"output_bytes\":0}\n";
	for (int i = 0; i < p.noutputs; i++) {
		const ccl::IO &io = p.outputs[i];
		const uint8_t *base = (io.mem == ccl::MEM_OCM ? c.ocm : c.ddr) + io.off;
		std::vector<float> v(io.bytes / 4);
		for (size_t k = 0; k < v.size(); k++) {
			int32_t x; memcpy(&x, base + 4 * k, 4);
			if (io.fmt == ccl::F32) memcpy(&v[k], &x, 4); else v[k] = (float)std::ldexp((double)x, -io.fmt);
		}
		std::string name = io.name;
		for (auto &ch : name) if (ch == '/' || ch == ':') ch = '_';
		write_npy(out + "/" + name + ".npy", v.data(), io);
	}
	FILE *cf = fopen(counters.c_str(), "w");
	if (!cf) die(counters + ": cannot write");
	bool ok = fputs(js.c_str(), cf) >= 0 && fflush(cf) == 0;
	int e = errno;
	if (fclose(cf) != 0 || !ok) die(counters + ": cannot write: " + strerror(e ? e : errno));
	return 0;
}
