#!/usr/bin/python3
"""whisper_fit.py — a seeded Whisper whose greedy decoding reproduces the bundled clips' transcripts.

    /usr/bin/python3 examples/models/whisper_fit.py OUT_DIR [--fast] [--seed 0] [--threads 1]

Greedy decoding of a seeded decoder locks onto one token whatever the audio. This script keeps
whisper.py's seeded encoder and seeded decoder layers and fits the end of the decoder so that
`wlower transcribe` (runtime/pipelines/whisper.c: prompt <|startoftranscript|><|en|><|transcribe|>,
timestamps on, OpenAI's greedy rules) prints the transcript of each clip of ../shared/data/audio
(texts from ../shared/data/README.md, tokenized with ../shared/data/whisper/multilingual.tiktoken)
and stops at <|endoftext|>:

  jfk.wav                      <|0.00|> And so my fellow Americans, ... country.<|11.00|><|endoftext|>
  1272-141231-0002.wav         <|0.00|> THE CUT ON HIS CHEST ... ABOUT<|13.34|><|endoftext|>
  long = A + B + A (35.34 s; A = jfk.wav cut to 11.00 s, B = the LibriSpeech clip padded with zeros
  to 13.34 s), two 30 s windows:
    window 0 (0..30 s)         <|0.00|> A text<|11.00|><|11.00|> B text<|24.34|><|24.34|><|endoftext|>
                               (ends on a timestamp pair: the next window starts at 24.34 s)
    window 1 (24.34..35.34 s)  <|startofprev|> + window 0's tokens, then the prompt, then
                               <|0.00|> A text<|11.00|><|endoftext|>

What is fitted. The decoder's inputs (token and position embeddings), its self- and
cross-attention and every layer but the last layer's MLP stay seeded, so the residual stream
before that MLP is a fixed function of (prefix, audio): it is computed once per training example
with torch (teacher forcing). The fit trains only the last layer's MLP (final_layer_norm, fc1, fc2),
the decoder's final layer_norm and an untied LM head (proj_out, initialised to the seeded
embed_tokens; whisper.py --untied-head) on those fixed features: a cheap per-position classifier,
no attention in the loop. Dimension 0 of the final layer_norm is pinned (gain 0, bias 1), so column
0 of the head is a per-token bias; head rows the fit does not train (every token that is not in a
transcript, not <|endoftext|>, not a timestamp used above and not one of whisper.py's "frequent"
rows) keep their seeded values except column 0 = -8.

Examples: every window above, clean and --aug augmented copies (seeded: gain x e^U(-0.4,0.4),
white noise at 25..45 dB SNR on the audio part, a shift of -3..3 mel frames); the encoder runs
once per copy (1x1 convolutions, oneDNN: Debian's torch uses the reference BLAS).
Loss: hinge on the top-1/top-2 gap under the pipeline's rules (suppressed tokens and timestamp
rules applied to the candidates; a text token must also beat the log-sum-exp of the allowed
timestamps, the rule that forces a timestamp), gap trained to --margin + 1, plus a small cross
entropy; full-batch Adam (lr 2e-3, --fast 1e-2), at most --max-steps. Tokens the head does not train are covered by a Cauchy-Schwarz bound
(|h[1:]| * max row norm - 8), so the gap holds over the whole vocabulary. Training stops once every
example's gap >= --margin + 0.5. Then every clean window is checked with full-vocabulary logits and
a Python copy of whisper.c's apply_rules (greedy = teacher forcing when every step is right): the
script fails (exit 1, nothing written) unless each reproduces its transcript with gap >= --margin.

Output: OUT_DIR in whisper.py --layout optimum's layout (encoder_model.onnx, decoder_model.onnx,
decoder_with_past_model.onnx, config.json, multilingual.tiktoken; "wlower_fit" in config.json:
the targets, steps, gap statistics, times), written to OUT_DIR.tmp and renamed. Deterministic for
a given --threads (seeded numpy/torch, torch.use_deterministic_algorithms). Sizes: default
Whisper-tiny (d 384, 6 heads, 4+4 layers, ffn 1536, 3000 frames = 30 s windows); --fast: d 64,
2 heads, 1 encoder + 2 decoder layers, ffn 256, the same 30 s windows (tests/oracle/
test_whisper_pipeline.py). Fit times and gaps: bench/RESULTS.md. No weights are committed.
"""
import argparse
import base64
import json
import os
import re
import shutil
import sys
import time
import wave

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import whisper as W  # noqa: E402

SHARED = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(HERE))), "shared", "data")
EOT, SOT, EN, TRANSCRIBE = W.EOT, W.SOT, W.EN, W.TRANSCRIBE
SOT_PREV, NO_SPEECH, NO_TS, TB = 50361, 50362, 50363, 50364
VOCAB = W.VOCAB
# whisper.c SUPPRESS (OpenAI's default non-speech list for the multilingual vocabulary)
SUPPRESS = [1, 2, 7, 8, 9, 10, 14, 25, 26, 27, 28, 29, 31, 58, 59, 60, 61, 62, 63, 90, 91, 92, 93, 359, 503, 522,
            542, 873, 893, 902, 918, 922, 931, 1350, 1853, 1982, 2460, 2627, 3246, 3253, 3268, 3536, 3846, 3961,
            4183, 4667, 6585, 6647, 7273, 9061, 9383, 10428, 10929, 11938, 12033, 12331, 12562, 13793, 14157,
            14635, 15265, 15618, 16553, 16604, 18362, 18956, 20075, 21675, 22520, 26130, 26161, 26435, 28279,
            29464, 31650, 32302, 32470, 36865, 42863, 47425, 49870, 50254]
SPECIAL_SUPPRESSED = [50358, TRANSCRIBE, SOT, SOT_PREV, SOT_PREV - 1, NO_SPEECH]
WINDOW = 480000
UNTRAINED_BIAS = 8.0


def readme_transcript(name):
    """The quoted transcript of audio/NAME in ../shared/data/README.md."""
    path = os.path.join(SHARED, "README.md")
    for line in open(path, encoding="utf-8"):
        if line.startswith("| audio/%s |" % name):
            m = re.search(r'"([^"]+)"', line)
            if m:
                return m.group(1)
    raise SystemExit("%s: no transcript for audio/%s" % (path, name))


def read_wav(path):
    with wave.open(path, "rb") as w:
        if w.getframerate() != 16000 or w.getnchannels() != 1 or w.getsampwidth() != 2:
            raise SystemExit("%s: want 16 kHz mono PCM16" % path)
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float64) / 32768.0


class Tokenizer:
    """Byte-level BPE encode with the tiktoken ranks (English ASCII pre-tokenizer: enough for the
    transcripts; a non-ASCII text is refused)."""
    PAT = re.compile(r"'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+")

    def __init__(self, path):
        self.ranks, self.bytes = {}, {}
        for n, line in enumerate(open(path, "rb"), 1):
            f = line.split()
            if len(f) != 2:
                raise SystemExit("%s:%d: want 'BASE64 RANK'" % (path, n))
            b, r = base64.b64decode(f[0]), int(f[1])
            self.ranks[b], self.bytes[r] = r, b

    def encode(self, text):
        if not text.isascii():
            raise SystemExit("tokenizer: non-ASCII transcript %r" % text)
        ids = []
        for piece in self.PAT.findall(text):
            parts = [bytes([c]) for c in piece.encode()]
            while len(parts) > 1:
                best = min(((self.ranks.get(parts[i] + parts[i + 1], 1 << 30), i) for i in range(len(parts) - 1)))
                if best[0] == 1 << 30:
                    break
                i = best[1]
                parts[i:i + 2] = [parts[i] + parts[i + 1]]
            ids += [self.ranks[p] for p in parts]
        if b"".join(self.bytes[i] for i in ids) != text.encode():
            raise SystemExit("tokenizer: %r does not round-trip" % text)
        return ids


def log_mel(audio, filters):
    """Whisper's log-mel of one zero-padded 30 s window [80, 3000] (what the pipeline's mel computes)."""
    a = np.zeros(WINDOW)
    a[:min(WINDOW, len(audio))] = audio[:WINDOW]
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(400) / 400)
    x = np.pad(a, (200, 200), mode="reflect")
    frames = np.lib.stride_tricks.sliding_window_view(x, 400)[::160]
    power = (np.abs(np.fft.rfft(frames * window, axis=1)) ** 2)[:-1]
    logm = np.log10(np.maximum(filters.astype(np.float64) @ power.T, 1e-10))
    logm = np.maximum(logm, logm.max() - 8.0)
    return ((logm + 4.0) / 4.0).astype(np.float32)


def ticks(n_samples):
    """A length in 20 ms timestamp ticks (rounded up)."""
    return -(-n_samples // 320)


def windows(tok):
    """[(name, audio, prompt ids, sampled ids incl. eot)] for the clips; see the module docstring."""
    jfk = read_wav(os.path.join(SHARED, "audio", "jfk.wav"))
    lib = read_wav(os.path.join(SHARED, "audio", "1272-141231-0002.wav"))
    tj = tok.encode(" " + readme_transcript("jfk.wav"))
    tl = tok.encode(" " + readme_transcript("1272-141231-0002.wav"))
    a = jfk[:176000]
    b = np.concatenate([lib, np.zeros(ticks(len(lib)) * 320 - len(lib))])
    long = np.concatenate([a, b, a])
    ka, kb = ticks(len(a)), ticks(len(b))
    sot = [SOT, EN, TRANSCRIBE]
    w0 = [TB] + tj + [TB + ka, TB + ka] + tl + [TB + ka + kb, TB + ka + kb]
    seek = (ka + kb) * 320
    out = [("jfk", jfk, sot, [TB] + tj + [TB + ticks(len(jfk)), EOT]),
           ("librispeech", lib, sot, [TB] + tl + [TB + ticks(len(lib)), EOT]),
           ("long-w0", long[:WINDOW], sot, w0 + [EOT]),
           ("long-w1", long[seek:seek + WINDOW], [SOT_PREV] + w0 + sot, [TB] + tj + [TB + ka, EOT])]
    for name, _, _, s in out:
        bad = [t for t in s if t in SUPPRESS]
        if bad:
            raise SystemExit("%s: transcript token(s) %s are in the suppressed set" % (name, bad))
    return out, long


def augment(audio, g):
    gain = np.exp(g.uniform(-0.4, 0.4))
    shift = int(g.integers(-3, 4)) * 160
    x = audio * gain
    x = np.concatenate([np.zeros(shift), x]) if shift > 0 else x[-shift:]
    rms = np.sqrt(np.mean(x ** 2)) + 1e-9
    snr = g.uniform(25, 45)
    x = x + g.standard_normal(len(x)) * rms * 10 ** (-snr / 20)
    return np.clip(x, -1, 1)


def rules(sampled, audio_ctx):
    """whisper.c apply_rules before its logits-dependent part: the suppressed ids, bool [vocab]."""
    ns = len(sampled)
    sup = np.zeros(VOCAB, bool)
    if ns == 0:                                          # SuppressBlank
        sup[220] = sup[EOT] = True
    sup[SUPPRESS] = True
    sup[SPECIAL_SUPPRESSED] = True
    sup[NO_TS] = True
    last_ts = ns >= 1 and sampled[-1] >= TB
    penult_ts = ns < 2 or sampled[-2] >= TB
    if last_ts:
        if penult_ts:
            sup[TB:] = True                              # after a pair: text or eot
        else:
            sup[:EOT] = True                             # after text+timestamp: a timestamp or eot
    tss = [t for t in sampled if t >= TB]
    if tss:                                              # monotonic
        sup[TB:tss[-1] if last_ts and not penult_ts else tss[-1] + 1] = True
    sup[TB + audio_ctx + 1:] = True                      # past the window's end
    if ns == 0:
        sup[:TB] = True                                  # the first token is a timestamp <= 1 s
        sup[TB + 51:] = True
    return sup


def greedy_check(logits, sampled, audio_ctx):
    """whisper.c apply_rules + argmax on full-vocabulary logits [len(sampled), vocab] under teacher
    forcing: (ok, gaps). gap = chosen - runner-up after the rules (inf when nothing competes)."""
    gaps, ok = [], True
    for i, y in enumerate(sampled):
        x = logits[i].astype(np.float64).copy()
        sup = rules(sampled[:i], audio_ctx)
        x[sup] = -np.inf
        lp = x - (np.max(x) + np.log(np.sum(np.exp(x - np.max(x)))))
        ts = lp[TB:]
        ts_lp = -np.inf if np.all(np.isinf(ts)) else np.max(ts) + np.log(np.sum(np.exp(ts - np.max(ts))))
        if ts_lp > np.max(lp[:TB]):
            x[:TB] = -np.inf
        order = np.argsort(-x, kind="stable")[:2]
        ok = ok and int(order[0]) == y
        gaps.append(float(x[order[0]] - x[order[1]]) if np.isfinite(x[order[1]]) else float("inf"))
    return ok, gaps


def fit_fn(a, t_start, c_start):
    def fit(torch, cfg, enc, dec, frequent):
        F = torch.nn.functional
        tok = Tokenizer(os.path.join(SHARED, "whisper", "multilingual.tiktoken"))
        filters = np.load(os.path.join(SHARED, "whisper", "mel_filters.npz"))["mel_80"]
        wins, _ = windows(tok)
        d, H, L, actx = cfg["d"], cfg["heads"], cfg["dec_layers"], cfg["audio_ctx"]
        P = {k: v.detach() for k, v in enc.named_parameters()}

        def conv1x1(x, w, b=None):          # x [1, cin, n] -> [1, cout, n] (oneDNN, not the reference BLAS)
            return F.conv1d(x, w[:, :, None], b)

        def ln_cm(x, g, b):                 # LayerNorm over channels of [1, d, n]
            mu = x.mean(1, keepdim=True)
            var = ((x - mu) ** 2).mean(1, keepdim=True)
            return (x - mu) / torch.sqrt(var + 1e-5) * g[None, :, None] + b[None, :, None]

        def attn_cm(q, k, v):               # [1, d, n] each; per-head softmax(q k^T) v as grouped 1x1 convs
            n, hd = k.shape[2], d // H
            kw = k[0].view(H, hd, n).permute(0, 2, 1).reshape(H * n, hd, 1)
            s = F.conv1d(q, kw, groups=H).view(H, n, -1).softmax(1)
            vw = v[0].reshape(H * hd, n, 1)
            return F.conv1d(s.reshape(1, H * n, -1), vw, groups=H)

        def encode(mel):                    # [80, 3000] -> [ctx, d], = enc(mel) (checked below)
            x = F.gelu(F.conv1d(torch.from_numpy(mel)[None], P["conv1.weight"], P["conv1.bias"], padding=1))
            x = F.gelu(F.conv1d(x, P["conv2.weight"], P["conv2.bias"], stride=2, padding=1))
            x = x + P["embed_positions.weight"].t()[None]
            for i in range(cfg["enc_layers"]):
                p = lambda n: P["layers.%d.%s" % (i, n)]  # noqa: E731
                h = ln_cm(x, p("self_attn_layer_norm.weight"), p("self_attn_layer_norm.bias"))
                q = conv1x1(h, p("self_attn.q_proj.weight"), p("self_attn.q_proj.bias")) * (d // H) ** -0.5
                k = conv1x1(h, p("self_attn.k_proj.weight"))
                v = conv1x1(h, p("self_attn.v_proj.weight"), p("self_attn.v_proj.bias"))
                x = x + conv1x1(attn_cm(q, k, v), p("self_attn.out_proj.weight"), p("self_attn.out_proj.bias"))
                h = ln_cm(x, p("final_layer_norm.weight"), p("final_layer_norm.bias"))
                h = F.gelu(conv1x1(h, p("fc1.weight"), p("fc1.bias")))
                x = x + conv1x1(h, p("fc2.weight"), p("fc2.bias"))
            return ln_cm(x, P["layer_norm.weight"], P["layer_norm.bias"])[0].t().contiguous()

        # 1. encoder outputs of every window, clean and augmented
        t0 = time.time()
        encs = []
        with torch.no_grad():
            for wi, (name, audio, _, _) in enumerate(wins):
                g = np.random.default_rng([a.seed, 7919, wi])
                copies = [audio] + [augment(audio, g) for _ in range(a.aug)]
                encs.append(torch.stack([encode(log_mel(c, filters)) for c in copies]))
                if wi == 0:
                    ref = enc(torch.from_numpy(log_mel(audio, filters))[None])[0]
                    err = float((ref - encs[0][0]).abs().max())
                    if err > 1e-3:
                        raise SystemExit("whisper_fit: 1x1-conv encoder differs from the module by %g" % err)
        t_enc = time.time() - t0
        print("whisper_fit: encoder outputs of %d windows x %d copies: %.1f s" % (len(wins), a.aug + 1, t_enc),
              file=sys.stderr)

        # 2. fixed features: the residual stream before the last layer's MLP, teacher forced
        t0 = time.time()
        last = dec.layers[L - 1]
        grab = {}
        hook = last.final_layer_norm.register_forward_hook(lambda m, i, o: grab.__setitem__("x", i[0]))
        feats, targets, info = [], [], []
        with torch.no_grad():
            for wi, (name, _, prompt, sampled) in enumerate(wins):
                seq = prompt + sampled
                ids = torch.tensor([seq[:-1]] * encs[wi].shape[0])
                dec(ids, encs[wi])
                x = grab["x"][:, len(prompt) - 1:]          # [copies, len(sampled), d]
                feats.append(x.reshape(-1, d))
                targets += sampled * x.shape[0]
                info += [(wi, c, i) for c in range(x.shape[0]) for i in range(len(sampled))]
        hook.remove()
        X = torch.cat(feats)
        t_feat = time.time() - t0

        # candidates: transcript tokens, eot, timestamps used, frequent rows; the rest bounded
        cand = sorted(set(targets) | {EOT} | set(int(i) for i in frequent))
        col = {t: j for j, t in enumerate(cand)}
        rest = np.ones(VOCAB, bool)
        rest[cand] = False
        head = dec.proj_out.weight
        with torch.no_grad():
            head[torch.from_numpy(rest), 0] = -UNTRAINED_BIAS
        rn = head[:, 1:].detach().norm(dim=1).numpy()
        r_text = float(rn[:TB][rest[:TB]].max())
        r_ts = float(rn[TB:][rest[TB:]].max())
        # per position: allowed candidate mask, text allowed, count of untrained timestamps allowed
        N, C = len(targets), len(cand)
        allow = np.zeros((N, C), bool)
        text_ok = np.zeros(N, bool)
        ts_ok_c = np.zeros((N, C), bool)
        n_rest_ts = np.zeros(N)
        is_ts_target = np.array([t >= TB for t in targets])
        cand_ts = np.array([t >= TB for t in cand])
        cache = {}
        for n, (wi, c, i) in enumerate(info):
            key = (wi, i)
            if key not in cache:
                ok = ~rules(wins[wi][3][:i], actx)
                cache[key] = (ok[cand], bool((ok[:TB] & rest[:TB]).any()), int((ok[TB:] & rest[TB:]).sum()))
            allow[n], text_ok[n], n_rest_ts[n] = cache[key]
            ts_ok_c[n] = allow[n] & cand_ts
        ycol = torch.tensor([col[t] for t in targets])
        allow_t = torch.from_numpy(allow)
        ts_ok_t = torch.from_numpy(ts_ok_c)
        text_ok_t = torch.from_numpy(text_ok)
        log_nrest = torch.from_numpy(np.log(np.maximum(n_rest_ts, 1e-30)))
        has_rest_ts = torch.from_numpy(n_rest_ts > 0)
        is_ts_t = torch.from_numpy(is_ts_target)

        # 3. train the last MLP, the final norm and the candidate head rows
        fln, fc1, fc2, lnf = last.final_layer_norm, last.fc1, last.fc2, dec.layer_norm
        Wc = head[torch.tensor(cand)].detach().clone().requires_grad_(True)
        params = [fln.weight, fln.bias, fc1.weight, fc1.bias, fc2.weight, fc2.bias, lnf.weight, lnf.bias, Wc]
        with torch.no_grad():
            lnf.weight[0], lnf.bias[0] = 0.0, 1.0
        for p in params:
            p.requires_grad_(True)
        opt = torch.optim.Adam(params, lr=a.lr)
        Xc = X.t()[None].contiguous()                       # [1, d, N]
        NEG = -1e9

        def forward():
            h = ln_cm(Xc, fln.weight, fln.bias)
            h = Xc + conv1x1(F.gelu(conv1x1(h, fc1.weight, fc1.bias)), fc2.weight, fc2.bias)
            h = ln_cm(h, lnf.weight, lnf.bias)              # [1, d, N]
            z = conv1x1(h, Wc)[0].t()                       # [N, C]
            hn = h[0, 1:].norm(dim=0)                       # |h[1:]| per position
            return z, hn

        def gaps(z, hn):
            """chosen - strongest competitor under the rules (candidates exact, the rest bounded)."""
            zm = torch.where(allow_t, z, torch.full_like(z, NEG))
            zy = zm.gather(1, ycol[:, None])[:, 0]
            other = zm.scatter(1, ycol[:, None], NEG).max(1).values
            b_text = hn * r_text - UNTRAINED_BIAS
            b_ts = hn * r_ts - UNTRAINED_BIAS
            comp = torch.maximum(other, torch.where(text_ok_t, b_text, torch.full_like(b_text, NEG)))
            comp = torch.maximum(comp, torch.where(has_rest_ts, b_ts, torch.full_like(b_ts, NEG)))
            # a text token (or eot) must also beat the log-sum-exp of the allowed timestamps
            zts = torch.where(ts_ok_t, z, torch.full_like(z, NEG))
            lse = torch.logsumexp(torch.cat([zts, torch.where(has_rest_ts, log_nrest + b_ts,
                                                               torch.full_like(b_ts, NEG))[:, None]], 1), 1)
            comp = torch.where(is_ts_t, comp, torch.maximum(comp, lse))
            return zy - comp, zm

        t0 = time.time()
        step, hist = 0, []
        for step in range(1, a.max_steps + 1):
            z, hn = forward()
            gap, zm = gaps(z, hn)
            loss = F.relu(a.margin + 1.0 - gap).mean() + 0.05 * F.cross_entropy(zm, ycol)
            gmin = float(gap.min())
            if step % 25 == 1:
                hist.append((step, round(float(loss), 4), round(gmin, 3)))
                print("whisper_fit: step %d loss %.4f min gap %.3f" % (step, float(loss), gmin), file=sys.stderr)
            if gmin >= a.margin + 0.5:
                break
            opt.zero_grad()
            loss.backward()
            opt.step()
            with torch.no_grad():
                lnf.weight[0], lnf.bias[0] = 0.0, 1.0
        t_train = time.time() - t0
        with torch.no_grad():
            z, hn = forward()
            gap, _ = gaps(z, hn)
            head[torch.tensor(cand)] = Wc
        for p in params:
            p.requires_grad_(False)
        g = gap.numpy()

        # 4. full-vocabulary check of every clean window with whisper.c's rules
        t0 = time.time()
        exact = {}
        with torch.no_grad():
            for wi, (name, _, prompt, sampled) in enumerate(wins):
                seq = prompt + sampled
                lg, _ = dec(torch.tensor([seq[:-1]]), encs[wi][:1])
                ok, gg = greedy_check(lg[0, len(prompt) - 1:].numpy(), sampled, actx)
                exact[name] = {"ok": ok, "min_gap": round(min(gg), 3), "tokens": len(sampled)}
                if not ok or min(gg) < a.margin:
                    raise SystemExit("whisper_fit: window %s does not decode its transcript with gap >= %g "
                                     "(ok %s, min gap %.3f) after %d steps; try --max-steps"
                                     % (name, a.margin, ok, min(gg), step))
        t_check = time.time() - t0
        res = {"windows": {w[0]: {"prompt": w[2], "tokens": w[3]} for w in wins},
               "copies_per_window": a.aug + 1, "examples": int(N), "candidates": C, "steps": step,
               "margin": a.margin, "lr": a.lr, "threads": a.threads, "seed": a.seed,
               "gap_all_copies": {"min": round(float(g.min()), 3), "p5": round(float(np.percentile(g, 5)), 3),
                                  "median": round(float(np.median(g)), 3)},
               "clean_full_vocab": exact, "loss_history": hist,
               "seconds": {"encoder": round(t_enc, 1), "features": round(t_feat, 1), "train": round(t_train, 1),
                           "check": round(t_check, 1), "total": round(time.time() - t_start, 1),
                           "cpu_total": round(time.process_time() - c_start, 1)}}
        print("whisper_fit: %d steps, %d examples, gap (all copies, bound-based) min %.2f p5 %.2f median %.2f; "
              "clean windows exact: %s; %.0f s" % (step, N, g.min(), np.percentile(g, 5), np.median(g),
                                                   ", ".join("%s %.2f" % (k, v["min_gap"]) for k, v in exact.items()),
                                                   time.time() - t_start), file=sys.stderr)
        return res
    return fit


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", metavar="OUT_DIR")
    ap.add_argument("--fast", action="store_true", help="small model for tests (d 64, 1+2 layers), 30 s windows")
    ap.add_argument("--seed", type=int, default=0, help="whisper.py's weight seed (default 0)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (default 1: on a shared machine more threads mostly wait on each other)")
    ap.add_argument("--aug", type=int, help="augmented copies per window (default 2: the encoder at d 384 costs "
                    "~45 s per copy on a loaded core; --fast 3)")
    ap.add_argument("--margin", type=float, default=2.0, help="top-1/top-2 logit gap to reach (default 2)")
    ap.add_argument("--lr", type=float, help="Adam learning rate (default 2e-3, --fast 1e-2; 1e-2 diverges at d 384)")
    ap.add_argument("--max-steps", type=int, default=2000, help="training steps at most (default 2000)")
    a = ap.parse_args(argv)
    if a.aug is None:
        a.aug = 3 if a.fast else 2
    if a.lr is None:
        a.lr = 1e-2 if a.fast else 2e-3
    import torch
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    torch.use_deterministic_algorithms(True)
    t_start, c_start = time.time(), time.process_time()
    out = os.path.abspath(a.out)
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    size = ["--enc-layers", "1", "--dec-layers", "2", "--d-model", "64", "--heads", "2", "--ffn", "256"] if a.fast \
        else ["--size", "tiny"]
    gen = ["--layout", "optimum", "--untied-head", "--seed", str(a.seed), "--out", tmp] + size
    try:
        rc = W.main(gen, fit=fit_fn(a, t_start, c_start))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if rc:
        shutil.rmtree(tmp, ignore_errors=True)
        return rc
    shutil.rmtree(out, ignore_errors=True)
    os.rename(tmp, out)
    print("whisper_fit: wrote %s (%.0f s)" % (out, time.time() - t_start), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
