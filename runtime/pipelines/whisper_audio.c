/* whisper_audio.c — an audio file to 16 kHz mono float samples: libsndfile
 * reads it (wav, flac, ogg/vorbis, opus, mp3: what the installed libsndfile
 * supports), channels are averaged, libsoxr resamples (SOXR_HQ) when the
 * file's rate differs. No hand-written decoder or resampler. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sndfile.h>
#include <soxr.h>
#include "pipeline.h"

int audio_read_mono(const char *path, int rate, float **samples, int64_t *n, Diag *d)
{
	*samples = NULL;
	*n = 0;
	int fd = file_open_regular(path, NULL, d);
	if (fd < 0)
		return WL_ERR;
	SF_INFO info;
	memset(&info, 0, sizeof info);
	SNDFILE *sf = sf_open_fd(fd, SFM_READ, &info, 1);
	if (!sf) {
		close(fd);             /* sf_open_fd closes it only through sf_close */
		diag_fail(d, "%s: not a readable audio file (%s)", path, sf_strerror(NULL));
		return WL_ERR;
	}
	if (info.channels < 1 || info.samplerate < 1000 || info.samplerate > 768000 || info.frames < 1 ||
	    info.frames > (int64_t)info.samplerate * 4 * 3600) {
		sf_close(sf);
		return diag_fail(d, "%s: %s (%lld frames, %d channels, %d Hz)", path,
		                 info.frames < 1 ? "no audio samples" : "unsupported audio layout",
		                 (long long)info.frames, info.channels, info.samplerate);
	}
	int64_t fr = info.frames;
	float *inter = malloc((size_t)fr * (size_t)info.channels * sizeof *inter);
	float *mono = malloc((size_t)fr * sizeof *mono);
	if (!inter || !mono)
		wl_die(__FILE__, __LINE__, "out of memory");
	sf_count_t got = sf_readf_float(sf, inter, fr);
	int err = sf_error(sf);
	sf_close(sf);
	if (got < 1 || err) {
		free(inter);
		free(mono);
		return diag_fail(d, "%s: cannot decode the audio samples (%s)", path,
		                 err ? sf_error_number(err) : "no frames could be read");
	}
	for (sf_count_t i = 0; i < got; i++) {
		double s = 0;
		for (int c = 0; c < info.channels; c++)
			s += inter[i * info.channels + c];
		mono[i] = (float)(s / info.channels);
	}
	free(inter);
	if (info.samplerate == rate) {
		*samples = mono;
		*n = got;
		return WL_OK;
	}
	size_t olen = (size_t)((double)got * rate / info.samplerate + 1), odone = 0;
	float *out = malloc(olen * sizeof *out);
	if (!out)
		wl_die(__FILE__, __LINE__, "out of memory");
	soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
	soxr_quality_spec_t q = soxr_quality_spec(SOXR_HQ, 0);
	soxr_error_t e = soxr_oneshot(info.samplerate, rate, 1, mono, (size_t)got, NULL, out, olen, &odone, &io, &q, NULL);
	free(mono);
	if (e) {
		free(out);
		return diag_fail(d, "%s: resampling from %d Hz failed (%s)", path, info.samplerate, e);
	}
	*samples = out;
	*n = (int64_t)odone;
	return WL_OK;
}
