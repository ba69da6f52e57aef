#!/usr/bin/python3
"""test_logmel_argmax.py WLOWER WORKDIR

End-to-end checks of the two pipeline ends of the fusion (issue 4):
  1. --prepend-logmel: a 1-layer Whisper-tiny-shaped encoder (3000 frames) fused
     with the log-mel op, run by `wlower run` on the real clip jfk.wav (padded
     to 480000 samples), against ONNX Runtime on the original encoder fed a
     float64 log-mel of the same clip: PSNR >= 80 dB.
  2. --append-argmax: the decoder prefill fused with greedy argmax, run on the
     ONNX Runtime hidden states: token ids equal ONNX Runtime's argmax of the
     original graph's logits.
Prints 'logmel-argmax: N passed, M failed'.
"""
import os
import subprocess
import sys
import wave

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
SHARED = os.path.normpath(os.path.join(ROOT, "..", "shared", "data"))


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(cmd[:3]), r.returncode, (r.stderr or r.stdout).strip()))
    return r.stdout


def read_wav(path):
    with wave.open(path, "rb") as w:
        assert w.getnchannels() == 1 and w.getsampwidth() == 2 and w.getframerate() == 16000, path
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    return pcm.astype(np.float64) / 32768.0


def log_mel64(audio, filters):
    """Whisper's log-mel, entirely in float64 (the reference)."""
    n_fft, hop, n = 400, 160, 480000
    a = np.zeros(n)
    a[: min(n, len(audio))] = audio[:n]
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n_fft) / n_fft)
    x = np.pad(a, (n_fft // 2, n_fft // 2), mode="reflect")
    frames = np.lib.stride_tricks.sliding_window_view(x, n_fft)[::hop]
    spec = np.fft.rfft(frames * window, axis=1)
    power = (np.abs(spec) ** 2)[:-1]
    mel = filters.astype(np.float64) @ power.T
    logm = np.log10(np.maximum(mel, 1e-10))
    logm = np.maximum(logm, logm.max() - 8.0)
    return (logm + 4.0) / 4.0


def psnr(ref, got):
    mse = np.mean((ref.astype(np.float64) - got.astype(np.float64)) ** 2)
    peak = np.max(np.abs(ref))
    return float("inf") if mse == 0 else 10 * np.log10(peak * peak / mse)


def main():
    wl, work = os.path.abspath(sys.argv[1]), sys.argv[2]
    os.makedirs(work, exist_ok=True)
    ort = ["node", os.path.join(HERE, "ort_run.js")]
    run(["sh", os.path.join(HERE, "install.sh")])
    m = os.path.join(work, "m")
    if not os.path.exists(os.path.join(m, "decoder_prefill.onnx")):
        run(["/usr/bin/python3", os.path.join(ROOT, "examples", "models", "whisper.py"), "--size", "tiny",
             "--layers", "1", "--frames", "3000", "--vocab", "1000", "--which", "encoder,decoder_prefill",
             "--out", m])
    results = []

    # 1. log-mel on the input side
    audio = read_wav(os.path.join(SHARED, "audio", "jfk.wav"))
    filters = np.load(os.path.join(SHARED, "whisper", "mel_filters.npz"))["mel_80"]
    mel = log_mel64(audio, filters)[None].astype(np.float32)
    wav = np.zeros((1, 480000), np.float32)
    wav[0, : len(audio)] = audio[:480000]
    np.save(os.path.join(work, "mel.npy"), mel)
    np.save(os.path.join(work, "wav.npy"), wav)
    run(ort + [os.path.join(m, "encoder_model.onnx"), os.path.join(work, "ort_enc"),
               "input_features=" + os.path.join(work, "mel.npy")])
    fenc = os.path.join(work, "enc_logmel.onnx")
    run([wl, os.path.join(m, "encoder_model.onnx"), "--prepend-logmel", "--stop-after=fuse", "-o", fenc])
    run([wl, "run", fenc, "--input", "waveform=" + os.path.join(work, "wav.npy"),
         "--output-dir", os.path.join(work, "wl_enc")])
    ref = np.load(os.path.join(work, "ort_enc", "last_hidden_state.npy"))
    got = np.load(os.path.join(work, "wl_enc", "last_hidden_state.npy"))
    p = psnr(ref, got)
    results.append(("logmel jfk.wav PSNR %.2f dB (gate 80)" % p, p >= 80))

    # 2. greedy argmax on the output side, fed ONNX Runtime's hidden states
    ids = np.array([[50258, 50259, 50359, 50363]], np.int64) % 1000
    np.save(os.path.join(work, "ids.npy"), ids)
    hid = os.path.join(work, "ort_enc", "last_hidden_state.npy")
    run(ort + [os.path.join(m, "decoder_prefill.onnx"), os.path.join(work, "ort_dec"),
               "input_ids=" + os.path.join(work, "ids.npy"), "encoder_hidden_states=" + hid])
    fdec = os.path.join(work, "dec_argmax.onnx")
    run([wl, os.path.join(m, "decoder_prefill.onnx"), "--append-argmax", "--stop-after=fuse", "-o", fdec])
    run([wl, "run", fdec, "--input", "input_ids=" + os.path.join(work, "ids.npy"),
         "--input", "encoder_hidden_states=" + hid, "--output-dir", os.path.join(work, "wl_dec")])
    want = np.argmax(np.load(os.path.join(work, "ort_dec", "logits.npy")), axis=-1)
    got = np.load(os.path.join(work, "wl_dec", "token_ids.npy"))
    ok = got.dtype == np.int32 and got.shape == want.shape and np.array_equal(got, want)
    results.append(("argmax ids %s vs ORT %s (%s)" % (got.tolist(), want.tolist(), got.dtype), ok))

    for msg, ok in results:
        print("%s %s" % ("ok  " if ok else "FAIL", msg))
    nf = sum(1 for _, ok in results if not ok)
    print("logmel-argmax: %d passed, %d failed" % (len(results) - nf, nf))
    return 1 if nf else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # noqa: BLE001 - one line, then fail
        print("logmel-argmax: FAIL: %s" % e)
        print("logmel-argmax: 0 passed, 1 failed")
        sys.exit(1)
