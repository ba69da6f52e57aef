#!/usr/bin/python3
"""Calibration sample sets for the wlower model generators (numpy only; no torch needed).

Whisper log-mels (--mels N): real log-mel spectrograms of the speech clips in
/work/shared/data/audio/*.wav, computed the way Whisper does (16 kHz, pad/trim to 480000
samples, periodic Hann 400, hop 160, reflect pad 200, |STFT|^2, drop the last frame,
mel_80 filters from /work/shared/data/whisper/mel_filters.npz, log10(max(x, 1e-10)),
max(x, max(x) - 8), (x + 4) / 4). Sample 0.. are the clean clips; the rest are seeded
augmentations: clip or both clips joined, leading silence shift (0-3 s), start trim, gain
(-20..+6 dB), speed 0.9..1.1 (resampled), additive white/pink noise at 10..40 dB SNR or
none. With --frames F < 3000 each sample is an F-frame window of the 3000 frames, chosen
inside the speech (the normalization still uses the whole 30 s, as the pipeline does).

  mels.npy        [N, 80, F] float32  (wlower calibrate --samples input_features=mels.npy)
  audio.npy       [N, 480000] float32 (with --audio: the same waveforms, for --prepend-logmel)

Whisper token ids (--tokens N):
  input_ids.npy       [N, 4] int64: decoder prompts <|startoftranscript|><|lang|><|task|><|notimestamps|>
                      (en transcribe first; other languages, translate, a timestamp start mixed in)
  input_ids_step.npy  [N, 1] int64: next tokens drawn from the clips' transcripts, encoded with
                      the real tokenizer (whisper/multilingual.tiktoken, byte-level BPE)
  transcripts.json    each clip's transcript and its token ids (a check for the C tokenizer)
  --vocab V maps ids >= V to id % V (for the small --vocab test variants of whisper.py).

Usage (run with /usr/bin/python3):
  /usr/bin/python3 examples/models/samples.py --mels 73 --frames 3000 --out /tmp/cal
  /usr/bin/python3 examples/models/samples.py --mels 8 --frames 200 --tokens 16 --vocab 1000 --out /tmp/cal-small
  /usr/bin/python3 examples/models/samples.py --mels 4 --audio --out /tmp/cal-audio
"""

import argparse
import base64
import glob
import json
import os
import re
import sys
import wave

import numpy as np

DATA = os.environ.get("WLOWER_DATA", "/work/shared/data")
SR, N_FFT, HOP, N_SAMPLES, N_FRAMES = 16000, 400, 160, 480000, 3000
EOT, SOT, EN, TRANSLATE, TRANSCRIBE, NOTIMESTAMPS, TS0 = 50257, 50258, 50259, 50358, 50359, 50363, 50364
# Whisper's language tokens follow <|en|> in this order (50259 en, 50260 zh, 50261 de, 50262 es, ...)
LANG_FIRST = 50259
N_LANGS = 99

TRANSCRIPTS = {
    "jfk.wav": " And so my fellow Americans, ask not what your country can do for you, "
               "ask what you can do for your country.",
    "1272-141231-0002.wav": " THE CUT ON HIS CHEST STILL DRIPPING BLOOD THE ACHE OF HIS OVERSTRAINED EYES "
                            "EVEN THE SOARING ARENA AROUND HIM WITH THE THOUSANDS OF SPECTATORS WERE "
                            "TRIVIALITIES NOT WORTH THINKING ABOUT",
}


# ---------------------------------------------------------------- audio / log-mel

def load_wav(path):
    with wave.open(path) as w:
        assert w.getframerate() == SR and w.getsampwidth() == 2, path
        x = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / 32768.0
        if w.getnchannels() > 1:
            x = x.reshape(-1, w.getnchannels()).mean(axis=1)
    return x


def pad_or_trim(x, n=N_SAMPLES):
    return x[:n] if len(x) >= n else np.pad(x, (0, n - len(x)))


def log_mel(audio, filters):
    """Whisper log_mel_spectrogram for one waveform [480000] -> [80, 3000] float32."""
    audio = pad_or_trim(audio.astype(np.float32))
    window = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(N_FFT) / N_FFT)).astype(np.float32)  # periodic Hann
    x = np.pad(audio, (N_FFT // 2, N_FFT // 2), mode="reflect")
    n = 1 + (len(x) - N_FFT) // HOP
    frames = np.lib.stride_tricks.as_strided(x, shape=(n, N_FFT), strides=(x.strides[0] * HOP, x.strides[0]))
    spec = np.fft.rfft(frames * window, axis=1)           # [3001, 201]
    power = (spec.real ** 2 + spec.imag ** 2)[:-1]        # drop last frame -> [3000, 201]
    mel = filters.astype(np.float64) @ power.T            # [80, 3000]
    logm = np.log10(np.maximum(mel, 1e-10))
    logm = np.maximum(logm, logm.max() - 8.0)
    return ((logm + 4.0) / 4.0).astype(np.float32)


def pink_noise(g, n):
    """1/f noise via spectral shaping of white noise, unit rms."""
    w = np.fft.rfft(g.standard_normal(n))
    f = np.arange(len(w), dtype=np.float64)
    f[0] = 1.0
    p = np.fft.irfft(w / np.sqrt(f), n)
    return p / (np.sqrt(np.mean(p ** 2)) + 1e-12)


def augment(g, clips):
    """One seeded variation of the speech clips; returns (waveform, speech_start, speech_len) in samples."""
    if len(clips) > 1 and g.random() < 0.25:
        x = np.concatenate([clips[i] for i in g.permutation(len(clips))])
    else:
        x = clips[g.integers(len(clips))]
    if g.random() < 0.5:                                       # speed 0.9..1.1 by resampling
        r = g.uniform(0.9, 1.1)
        t = np.arange(0, len(x) - 1, r)
        x = np.interp(t, np.arange(len(x)), x).astype(np.float32)
    if g.random() < 0.5:                                       # trim the start
        x = x[g.integers(0, min(len(x) // 4, 2 * SR)):]
    x = x * np.float32(10 ** (g.uniform(-20, 6) / 20))         # gain
    lead = g.integers(0, 3 * SR) if g.random() < 0.6 else 0    # leading silence (shift)
    x = np.concatenate([np.zeros(lead, np.float32), x])
    x = pad_or_trim(x)
    speech_len = min(len(x) - lead, N_SAMPLES - lead)
    u = g.random()
    if u < 0.7:                                                # noise over the whole window
        rms = np.sqrt(np.mean(x[lead:lead + speech_len] ** 2)) + 1e-9
        snr = g.uniform(10, 40)
        nz = g.standard_normal(N_SAMPLES) if u < 0.35 else pink_noise(g, N_SAMPLES)
        x = x + (nz * rms * 10 ** (-snr / 20)).astype(np.float32)
    return np.clip(x, -1.0, 1.0).astype(np.float32), int(lead), int(speech_len)


def make_mels(n, frames, seed, want_audio):
    filters = np.load(os.path.join(DATA, "whisper", "mel_filters.npz"))["mel_80"]
    paths = sorted(glob.glob(os.path.join(DATA, "audio", "*.wav")))
    if not paths:
        raise SystemExit("no wav files under %s/audio" % DATA)
    clips = [load_wav(p) for p in paths]
    g = np.random.default_rng(seed)
    mels = np.empty((n, 80, frames), np.float32)
    audio = np.empty((n, N_SAMPLES), np.float32) if want_audio else None
    for i in range(n):
        if i < len(clips):
            x, lead, slen = pad_or_trim(clips[i]), 0, min(len(clips[i]), N_SAMPLES)
        else:
            x, lead, slen = augment(g, clips)
        m = log_mel(x, filters)
        if frames < N_FRAMES:
            s0, s1 = lead // HOP, (lead + slen) // HOP
            hi = max(s0, min(s1, N_FRAMES) - frames)
            start = int(g.integers(s0, hi + 1)) if hi > s0 else min(s0, N_FRAMES - frames)
            m = m[:, start:start + frames]
        elif frames > N_FRAMES:
            raise SystemExit("--frames must be <= 3000")
        mels[i] = m
        if audio is not None:
            audio[i] = x
    return mels, audio, [os.path.basename(p) for p in paths]


# ---------------------------------------------------------------- tokens

# GPT-2 / Whisper pre-tokenizer, with \p{L} as [^\W\d_] and \p{N} as \d (Python re has no \p{..})
PAT = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?[^\s\w]+|\s+(?!\S)|\s+""")


def load_ranks(path):
    ranks = {}
    with open(path, "rb") as f:
        for line in f:
            if line.strip():
                tok, rank = line.split()
                ranks[base64.b64decode(tok)] = int(rank)
    return ranks


def bpe(piece, ranks):
    if piece in ranks:
        return [ranks[piece]]
    parts = [bytes([b]) for b in piece]
    while len(parts) > 1:
        best, bi = None, -1
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and (best is None or r < best):
                best, bi = r, i
        if best is None:
            break
        parts[bi:bi + 2] = [parts[bi] + parts[bi + 1]]
    return [ranks[p] for p in parts]


def encode(text, ranks):
    ids = []
    for m in PAT.finditer(text):
        ids += bpe(m.group(0).encode("utf-8"), ranks)
    return ids


def make_tokens(n, seed, vocab):
    ranks = load_ranks(os.path.join(DATA, "whisper", "multilingual.tiktoken"))
    trans = {k: {"text": v, "ids": encode(v, ranks)} for k, v in TRANSCRIPTS.items()}
    g = np.random.default_rng(seed + 7)
    prompts = np.empty((n, 4), np.int64)
    for i in range(n):
        u = g.random() if i else 0.0
        lang = EN if u < 0.6 else LANG_FIRST + int(g.integers(N_LANGS))
        task = TRANSCRIBE if (u < 0.6 or g.random() < 0.7) else TRANSLATE
        last = NOTIMESTAMPS if (u < 0.6 or g.random() < 0.7) else TS0
        prompts[i] = [SOT, lang, task, last]
    pool = np.array([t for v in trans.values() for t in v["ids"]] + [EOT], np.int64)
    step = g.choice(pool, size=(n, 1))
    if vocab is not None:
        prompts %= vocab
        step %= vocab
    return prompts, step, trans


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mels", type=int, default=0, metavar="N", help="write mels.npy with N samples")
    ap.add_argument("--frames", type=int, default=N_FRAMES, help="frames per mel sample (default 3000)")
    ap.add_argument("--audio", action="store_true", help="also write audio.npy [N,480000] (the same waveforms)")
    ap.add_argument("--tokens", type=int, default=0, metavar="N", help="write input_ids.npy / input_ids_step.npy")
    ap.add_argument("--vocab", type=int, help="map token ids >= V to id %% V (small test variants)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True, help="output directory")
    a = ap.parse_args(argv)
    if not a.mels and not a.tokens:
        ap.error("nothing to do: give --mels N and/or --tokens N")
    os.makedirs(a.out, exist_ok=True)

    if a.mels:
        mels, audio, names = make_mels(a.mels, a.frames, a.seed, a.audio)
        np.save(os.path.join(a.out, "mels.npy"), mels)
        print("mels.npy %s: min %.3f max %.3f mean %.3f std %.3f (clean clips first: %s)"
              % (list(mels.shape), mels.min(), mels.max(), mels.mean(), mels.std(), ", ".join(names)))
        if audio is not None:
            np.save(os.path.join(a.out, "audio.npy"), audio)
            print("audio.npy %s: peak %.3f" % (list(audio.shape), np.abs(audio).max()))
    if a.tokens:
        prompts, step, trans = make_tokens(a.tokens, a.seed, a.vocab)
        np.save(os.path.join(a.out, "input_ids.npy"), prompts)
        np.save(os.path.join(a.out, "input_ids_step.npy"), step)
        with open(os.path.join(a.out, "transcripts.json"), "w") as f:
            json.dump(trans, f, indent=1)
        print("input_ids.npy %s, input_ids_step.npy %s; transcript tokens: %s"
              % (list(prompts.shape), list(step.shape),
                 "; ".join("%s %d" % (k, len(v["ids"])) for k, v in trans.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
