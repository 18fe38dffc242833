"""The Whisper C API (include/akunu/whisper.h) driven through ctypes on
libakunu: the log-mel spectrogram against akunu/whisper/mel.py; transcriptions
(WAV file, PCM, and both streaming forms) against the Python
WhisperModel.transcribe on random-weight Whisper models (GGUF, Hugging Face and
CTranslate2) and on the real whisper tiny.en with espeak-ng speech: the same
text, tokens and segment times; and bad input as errors."""

import ctypes
import glob
import os
import shutil
import struct
import subprocess

import numpy as np
import pytest

import akunu
from akunu.whisper import load_audio, log_mel_spectrogram

c_int32, c_bool, c_char_p, c_void_p, c_double, c_float = (ctypes.c_int32, ctypes.c_bool, ctypes.c_char_p,
                                                           ctypes.c_void_p, ctypes.c_double, ctypes.c_float)
P = ctypes.POINTER


class Stats(ctypes.Structure):
    _fields_ = [(n, c_float) for n in ("audio_ms", "mel_ms", "encode_ms", "decode_ms", "total_ms")] + \
               [(n, c_int32) for n in ("n_windows", "n_segments", "n_tokens")] + [("language", ctypes.c_char * 8)]


class LoadParams(ctypes.Structure):
    _fields_ = [("device", c_char_p), ("n_ctx", c_int32), ("n_threads", c_int32)]


# One thread each, C and Python: the models are tiny, and thread handoffs on a busy
# machine cost more than they save.
N_THREADS = 1


def _py_load(path):
    return akunu.load(path, device="cpu", n_threads=N_THREADS, n_beams=1)


SEGMENT_CB = ctypes.CFUNCTYPE(c_bool, c_int32, c_int32, c_char_p, c_void_p)


def _lib_file():
    pkg = os.path.dirname(akunu.__file__)
    for d in (os.path.join(pkg, "lib"), os.path.dirname(os.path.realpath(akunu._core.__file__))):
        found = glob.glob(os.path.join(d, "libakunu.so*")) + glob.glob(os.path.join(d, "libakunu*.dylib"))
        if found:
            return found[0]
    pytest.fail("libakunu is missing from the akunu package (akunu/lib) and the build tree")


@pytest.fixture(scope="module")
def lib():
    L = ctypes.CDLL(_lib_file())
    sig = {
        "akunu_last_error": (c_char_p, []),
        "akunu_load_model": (c_int32, [c_char_p, c_void_p, P(c_void_p)]),
        "akunu_free_model": (None, [c_void_p]),
        "akunu_is_whisper": (c_int32, [c_void_p]),
        "akunu_tensor_count": (c_int32, [c_void_p]),
        "akunu_tensor_name": (c_char_p, [c_void_p, c_int32]),
        "akunu_model_memory": (ctypes.c_size_t, [c_void_p]),
        "akunu_get_position": (c_int32, [c_void_p]),
        "akunu_logits": (c_int32, [c_void_p, P(c_int32), c_int32, P(c_float)]),
        "akunu_generate": (c_int32, [c_void_p, P(c_int32), c_int32, c_int32, c_void_p, P(c_int32), c_int32,
                                     P(c_int32), P(c_int32)]),
        "akunu_transcribe": (c_int32, [c_void_p, c_char_p, c_char_p, P(Stats), P(c_char_p)]),
        "akunu_transcribe_pcm": (c_int32, [c_void_p, P(c_float), c_int32, c_char_p, P(Stats), P(c_char_p)]),
        "akunu_transcribe_stream": (c_int32, [c_void_p, c_char_p, c_char_p, P(Stats), SEGMENT_CB, c_void_p,
                                              P(c_char_p)]),
        "akunu_transcribe_pcm_stream": (c_int32, [c_void_p, P(c_float), c_int32, c_char_p, P(Stats), SEGMENT_CB,
                                                  c_void_p, P(c_char_p)]),
        "akunu_set_timestamps": (c_int32, [c_void_p, c_bool]),
        "akunu_set_transcribe_temperatures": (c_int32, [c_void_p, P(c_double), c_int32]),
        "akunu_transcript_segment_count": (c_int32, [c_void_p]),
        "akunu_transcript_segment": (c_int32, [c_void_p, c_int32, P(c_int32), P(c_int32), P(c_char_p),
                                               P(P(c_int32)), P(c_int32)]),
        "akunu_whisper_log_mel": (c_int32, [P(c_float), c_int32, c_int32, c_int32, P(c_float), ctypes.c_int64,
                                            P(c_int32)]),
    }
    for name, (res, args) in sig.items():
        f = getattr(L, name)
        f.restype, f.argtypes = res, args
    return L


def _floats(a):
    a = np.ascontiguousarray(a, dtype=np.float32)
    return a, a.ctypes.data_as(P(c_float))


class CWhisper:
    """One akunu_model handle of a Whisper model, transcribing through the C API."""

    def __init__(self, lib, path):
        self.lib, self.path = lib, path
        self.h = c_void_p()
        params = LoadParams(b"cpu", 0, N_THREADS)
        rc = lib.akunu_load_model(path.encode(), ctypes.byref(params), ctypes.byref(self.h))
        assert rc == 0, lib.akunu_last_error()

    def close(self):
        self.lib.akunu_free_model(self.h)

    def temperatures(self, temps):
        arr = (c_double * len(temps))(*temps)
        assert self.lib.akunu_set_transcribe_temperatures(self.h, arr, len(temps)) == 0

    def transcribe(self, wav=None, pcm=None, language=None, stream=False, stop_after=None):
        """(text, segments [(start, end, text, tokens)], stats, callback calls [(start, end, text)])."""
        L, st, text, calls = self.lib, Stats(), c_char_p(), []
        lang = language.encode() if language else None

        def on_segment(start_ms, end_ms, seg_text, _):
            calls.append((start_ms / 1000, end_ms / 1000, seg_text.decode()))
            return stop_after is None or len(calls) < stop_after

        cb = SEGMENT_CB(on_segment)
        if wav is not None:
            rc = (L.akunu_transcribe_stream(self.h, wav.encode(), lang, ctypes.byref(st), cb, None, ctypes.byref(text))
                  if stream else L.akunu_transcribe(self.h, wav.encode(), lang, ctypes.byref(st), ctypes.byref(text)))
        else:
            keep, ptr = _floats(pcm)
            rc = (L.akunu_transcribe_pcm_stream(self.h, ptr, keep.size, lang, ctypes.byref(st), cb, None,
                                                ctypes.byref(text))
                  if stream else L.akunu_transcribe_pcm(self.h, ptr, keep.size, lang, ctypes.byref(st),
                                                        ctypes.byref(text)))
        assert rc == 0, L.akunu_last_error()
        return text.value.decode(), self.segments(), st, calls

    def segments(self):
        out = []
        for i in range(self.lib.akunu_transcript_segment_count(self.h)):
            a, b, t, toks, n = c_int32(), c_int32(), c_char_p(), P(c_int32)(), c_int32()
            assert self.lib.akunu_transcript_segment(self.h, i, ctypes.byref(a), ctypes.byref(b), ctypes.byref(t),
                                                     ctypes.byref(toks), ctypes.byref(n)) == 0
            out.append((a.value / 1000, b.value / 1000, t.value.decode(), toks[:n.value]))
        return out


def _python_view(result):
    return result.text, [(s.start, s.end, s.text, list(s.tokens)) for s in result.segments]


def _assert_same(c_result, py_result, check_stats=True):
    text, segs, st, calls = c_result
    want_text, want_segs = _python_view(py_result)
    assert segs == want_segs
    assert text == want_text
    if calls:
        assert calls == [s[:3] for s in segs]
    if check_stats:
        assert st.language.decode() == py_result.language
        assert st.n_segments == len(segs) and st.n_tokens == sum(len(s[3]) for s in segs)
        assert abs(st.audio_ms / 1000 - py_result.duration) < 0.011
        assert st.n_windows >= 1 and st.encode_ms > 0 and st.decode_ms > 0
        assert st.total_ms >= st.mel_ms + st.encode_ms + st.decode_ms - 1


# -- log-mel ------------------------------------------------------------------------------------

def _log_mel(lib, audio, n_mels, padding):
    keep, ptr = _floats(audio)
    frames = c_int32()
    assert lib.akunu_whisper_log_mel(ptr, keep.size, n_mels, padding, None, 0, ctypes.byref(frames)) == 0
    out = np.zeros((n_mels, frames.value), np.float32)
    rc = lib.akunu_whisper_log_mel(ptr, keep.size, n_mels, padding, out.ctypes.data_as(P(c_float)), out.size,
                                   ctypes.byref(frames))
    assert rc == 0, lib.akunu_last_error()
    return out


@pytest.mark.parametrize("n_mels", [80, 128])
@pytest.mark.parametrize("seconds,padding", [(0.005, 160), (0.5, 0), (7.3, 160), (31.0, 160)])
def test_log_mel_matches_python(lib, n_mels, seconds, padding):
    rng = np.random.default_rng(int(seconds * 100) + n_mels)
    n = int(seconds * 16000)
    audio = (0.2 * rng.standard_normal(n) * np.sin(np.arange(n) / 300.0)).astype(np.float32)
    want = log_mel_spectrogram(audio, n_mels, padding=padding)
    got = _log_mel(lib, audio, n_mels, padding)
    assert got.shape == want.shape
    assert np.abs(got - want).max() < 2e-5


def test_log_mel_of_speech_matches_python(lib, speech):
    audio = load_audio(speech["fox"][0])
    want = log_mel_spectrogram(audio, 80, padding=160)
    got = _log_mel(lib, audio, 80, 160)
    assert got.shape == want.shape and np.abs(got - want).max() < 2e-5


def test_log_mel_bad_arguments(lib):
    keep, ptr = _floats(np.zeros(1600))
    frames = c_int32()
    small = np.zeros(10, np.float32)
    assert lib.akunu_whisper_log_mel(ptr, keep.size, 80, 0, small.ctypes.data_as(P(c_float)), small.size,
                                     ctypes.byref(frames)) != 0
    assert b"buffer holds 10" in lib.akunu_last_error()
    assert lib.akunu_whisper_log_mel(ptr, keep.size, 80, 0, None, 0, None) != 0
    assert lib.akunu_whisper_log_mel(ptr, keep.size, 0, 0, None, 0, ctypes.byref(frames)) != 0
    nan, nan_ptr = _floats(np.full(400, np.nan))
    out = np.zeros((80, 10), np.float32)
    assert lib.akunu_whisper_log_mel(nan_ptr, nan.size, 80, 0, out.ctypes.data_as(P(c_float)), out.size,
                                     ctypes.byref(frames)) != 0


# -- random-weight models -----------------------------------------------------------------------

def _make_random_whisper(out_dir, tokenizer_json):
    """A random tiny Whisper (multilingual vocabulary) with a 64-token text context, so random
    output runs into the context quickly."""
    import torch
    import transformers as tf

    torch.manual_seed(0)
    cfg = tf.WhisperConfig(vocab_size=51865, num_mel_bins=80, d_model=64, encoder_layers=2, encoder_attention_heads=4,
                           decoder_layers=2, decoder_attention_heads=4, encoder_ffn_dim=256, decoder_ffn_dim=256,
                           max_source_positions=1500, max_target_positions=64, init_std=0.1, pad_token_id=50257,
                           bos_token_id=50257, eos_token_id=50257, decoder_start_token_id=50258)
    model = tf.WhisperForConditionalGeneration(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "layer_norm" in name:
                p.copy_(torch.rand_like(p) * 0.5 + (0.75 if name.endswith("weight") else -0.25))
            elif name.endswith(".bias"):
                p.copy_(torch.randn_like(p) * 0.1)
    model.save_pretrained(out_dir, safe_serialization=True)
    shutil.copy(tokenizer_json, os.path.join(out_dir, "tokenizer.json"))


@pytest.fixture(scope="module")
def random_paths(tmp_path_factory, whisper_base_dir):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    root = tmp_path_factory.mktemp("c_whisper")
    paths = {"hf": str(root / "hf")}
    _make_random_whisper(paths["hf"], os.path.join(whisper_base_dir, "tokenizer.json"))
    from akunu.convert_gguf import convert

    paths["gguf"] = str(root / "f32.gguf")
    convert(paths["hf"], paths["gguf"], "f32")
    try:
        import ctranslate2
    except ImportError:
        pass
    else:
        paths["ct2"] = str(root / "ct2")
        ctranslate2.converters.TransformersConverter(paths["hf"]).convert(paths["ct2"], quantization="float16",
                                                                          force=True)
        shutil.copy(os.path.join(paths["hf"], "tokenizer.json"), paths["ct2"])
    return paths


def _clips():
    rng = np.random.default_rng(7)
    t = np.arange(16000 * 4) / 16000
    chirp = 0.3 * np.sin(2 * np.pi * (200 + 400 * t) * t)
    noise = 0.05 * rng.standard_normal(16000 * 9) * np.repeat(rng.random(9), 16000)
    # over two 30-second windows: seek, the previous text as prompt, segments across windows
    long = np.concatenate([noise, chirp] * 5)
    return {"chirp": chirp.astype(np.float32), "noise": noise.astype(np.float32), "long": long.astype(np.float32)}


CLIPS = _clips()


@pytest.mark.parametrize("fmt", ["gguf", "hf", "ct2"])
def test_random_model_greedy_matches_python(lib, random_paths, fmt):
    if fmt not in random_paths:
        pytest.skip("ctranslate2 is not installed")
    c, py = CWhisper(lib, random_paths[fmt]), _py_load(random_paths[fmt])
    try:
        assert lib.akunu_is_whisper(c.h) == 1
        c.temperatures([0.0])
        for name, audio in CLIPS.items():
            if fmt != "gguf" and name == "long":
                continue
            want = py.transcribe(audio, temperature=0.0)  # language detected (multilingual vocabulary)
            _assert_same(c.transcribe(pcm=audio), want)
            if name == "long":
                assert len({s.seek for s in want.segments}) > 1  # the clip spans windows
        lib.akunu_set_timestamps(c.h, False)
        want = py.transcribe(CLIPS["noise"], language="de", timestamps=False, temperature=0.0)
        _assert_same(c.transcribe(pcm=CLIPS["noise"], language="DE"), want)
    finally:
        c.close()


def test_random_model_temperature_fallback_matches_python(lib, random_paths, monkeypatch):
    """The default decoding: random weights give improbable text, so every window falls back
    through the sampled temperatures (numpy's generator, best of 5) in both paths. A draw at
    temperature 1 from a near-flat distribution turns on the last bits of the logits, so the
    Python path reads the C log-mel here (equal to mel.py's within float rounding, above): the
    same encoder input, the same logits, the same draws."""
    import akunu.whisper.model as whisper_model

    monkeypatch.setattr(whisper_model, "log_mel_spectrogram",
                        lambda audio, n_mels, padding=0: _log_mel(lib, audio, n_mels, padding))
    c, py = CWhisper(lib, random_paths["gguf"]), _py_load(random_paths["gguf"])
    try:
        want = py.transcribe(CLIPS["chirp"], language="en")
        assert any(s.temperature > 0 for s in want.segments)
        _assert_same(c.transcribe(pcm=CLIPS["chirp"], language="en"), want)
    finally:
        c.close()


def test_stream_forms_callback_stop_and_files(lib, random_paths, tmp_path):
    import soundfile as sf

    c, py = CWhisper(lib, random_paths["gguf"]), _py_load(random_paths["gguf"])
    try:
        c.temperatures([0.0])
        audio = CLIPS["long"]
        want = py.transcribe(audio, language="en", temperature=0.0)
        assert len(want.segments) >= 3
        full = c.transcribe(pcm=audio, language="en", stream=True)
        _assert_same(full, want)
        assert full[3] == [s[:3] for s in full[1]]  # every segment went through the callback, in order
        # the callback's false stops after that segment: the text so far, its segments and stats
        text, segs, st, calls = c.transcribe(pcm=audio, language="en", stream=True, stop_after=2)
        assert len(calls) == 2 and segs == full[1][:2] and st.n_segments == 2
        assert text == "".join(s[2] for s in segs).strip()
        # a 16 kHz mono file: file, file stream
        path = str(tmp_path / "long.wav")
        sf.write(path, audio, 16000, subtype="FLOAT")
        want = py.transcribe(path, language="en", temperature=0.0)
        _assert_same(c.transcribe(wav=path, language="en"), want)
        _assert_same(c.transcribe(wav=path, language="en", stream=True), want)
        # a NULL callback streams nothing and still transcribes
        t = c_char_p()
        assert lib.akunu_transcribe_stream(c.h, path.encode(), b"en", None, SEGMENT_CB(), None, ctypes.byref(t)) == 0
        assert t.value.decode() == want.text
    finally:
        c.close()


# rate, channels, soundfile subtype: WAV encodings the C reader takes, each read and
# resampled as the Python path does (soundfile + scipy's resample_poly)
WAV_FORMATS = [(16000, 1, "PCM_16"), (44100, 2, "PCM_16"), (22050, 1, "FLOAT"), (48000, 1, "PCM_24"),
               (8000, 3, "PCM_32"), (11025, 1, "PCM_U8"), (32000, 2, "DOUBLE")]


def test_wav_encodings_match_python(lib, random_paths, tmp_path):
    import soundfile as sf
    from scipy.signal import resample_poly

    c, py = CWhisper(lib, random_paths["gguf"]), _py_load(random_paths["gguf"])
    try:
        c.temperatures([0.0])
        for rate, channels, subtype in WAV_FORMATS:
            mono = resample_poly(CLIPS["chirp"][:16000 * 3].astype(np.float64), rate, 16000)
            data = np.stack([mono * (0.5 + 0.2 * k) for k in range(channels)], axis=1)
            path = str(tmp_path / f"{rate}_{channels}_{subtype}.wav")
            sf.write(path, data, rate, subtype=subtype)
            want = py.transcribe(path, language="en", temperature=0.0)
            _assert_same(c.transcribe(wav=path, language="en"), want)
        # a data chunk cut short: both keep the whole frames that are there
        blob = open(path, "rb").read()
        cut = str(tmp_path / "cut.wav")
        with open(cut, "wb") as f:
            f.write(blob[:len(blob) * 2 // 3])
        _assert_same(c.transcribe(wav=cut, language="en"), py.transcribe(cut, language="en", temperature=0.0))
    finally:
        c.close()


# -- pieces, through akunu._testing (src/python/testing_whisper.cpp) --------------------------

@pytest.fixture(scope="module")
def hooks():
    testing = pytest.importorskip("akunu._testing")
    if not hasattr(testing, "whisper_token_info"):
        pytest.skip("akunu._testing was built without the Whisper hooks (src/python/testing_whisper.cpp)")
    return testing


def test_token_tables_match_python(hooks, random_paths, whisper_tiny_en_dir):
    """Special ids, languages, encode(" ") and the suppression list: from the file's list
    (tiny.en) or openai-whisper's non-speech symbols through BPE (the random models carry none)."""
    for path in list(random_paths.values()) + [whisper_tiny_en_dir]:
        py = _py_load(path)
        tok, info = py.tokenizer, hooks.whisper_token_info(path)
        for key in ("eot", "sot", "transcribe", "translate", "no_timestamps", "sot_prev", "no_speech",
                    "timestamp_begin", "multilingual", "space"):
            assert info[key] == getattr(tok, key), (path, key)
        assert info["languages"] == list(tok.languages.items())
        assert info["suppress"] == list(py.suppress_tokens), path
    assert "whisper.suppress_tokens" not in _py_load(random_paths["hf"]).metadata  # the symbols path ran


def test_token_text_matches_python(hooks, random_paths):
    tok = _py_load(random_paths["gguf"]).tokenizer
    rng = np.random.default_rng(3)
    byte_ids = [tok._tok.token_to_id(t) for t in ("\u00e2", "\u013b", "\u00aa", "\u00f0", "\u0141", "\u0134")]
    cases = [[], [tok.eot, tok.sot], [tok.timestamp_begin, 40, tok.timestamp_begin + 5], byte_ids, byte_ids[::-1]]
    cases += [rng.integers(0, tok.eot, int(rng.integers(1, 30))).tolist() for _ in range(200)]
    cases += [rng.integers(0, 51865, 12).tolist() for _ in range(50)]  # specials and timestamps dropped
    for ids, text in zip(cases, hooks.whisper_decode(random_paths["gguf"], cases)):
        assert text.decode("utf-8") == tok.decode(ids), ids


def test_wav_reading_matches_python(hooks, tmp_path):
    import soundfile as sf
    from scipy.signal import resample_poly

    rng = np.random.default_rng(11)
    for rate, channels, subtype in WAV_FORMATS + [(22050, 1, "PCM_16"), (96000, 2, "FLOAT")]:
        n = int(rate * 1.7)
        mono = 0.4 * np.sin(np.arange(n) * 2 * np.pi * 330 / rate) + 0.05 * rng.standard_normal(n)
        data = np.stack([mono * (0.5 + 0.2 * k) for k in range(channels)], axis=1)
        path = str(tmp_path / f"{rate}_{channels}_{subtype}.wav")
        sf.write(path, data, rate, subtype=subtype)
        want, got = load_audio(path), hooks.whisper_load_audio(path)
        assert got.shape == want.shape, path
        assert np.abs(got - want).max() < 1e-6, path
    assert resample_poly  # (the Python path's resampler, which load_audio runs)


# -- whisper tiny.en on speech ----------------------------------------------------------------

def test_tiny_en_matches_python(lib, whisper_tiny_en_dir, speech):
    """Defaults (timestamps, temperature fallback) through the file path (espeak's 22.05 kHz
    resampled in C) and PCM, the file stream, and timestamps off."""
    c, py = CWhisper(lib, whisper_tiny_en_dir), _py_load(whisper_tiny_en_dir)
    try:
        path, _ = speech["fox"]
        want = py.transcribe(path)
        assert "quick" in want.text.lower()  # (tiny.en mishears parts of espeak's voice)
        _assert_same(c.transcribe(wav=path), want)
        _assert_same(c.transcribe(pcm=load_audio(path)), want)
        path, _ = speech["stella"]
        want = py.transcribe(path)
        _assert_same(c.transcribe(wav=path, stream=True), want)
        assert lib.akunu_set_timestamps(c.h, False) == 0
        want = py.transcribe(path, timestamps=False)
        assert len(want.segments) == 1
        _assert_same(c.transcribe(wav=path, language="en"), want)
        assert lib.akunu_set_timestamps(c.h, True) == 0
        # an English-only model refuses other languages
        st, t = Stats(), c_char_p()
        assert lib.akunu_transcribe(c.h, path.encode(), b"de", ctypes.byref(st), ctypes.byref(t)) != 0
        assert b"English-only" in lib.akunu_last_error()
    finally:
        c.close()


def test_c_program_transcribes_as_python(whisper_tiny_en_dir, speech, tmp_path):
    """tests/c_api/whisper_check.c, built against the headers and libakunu, transcribes a WAV
    file with no Python in the process."""
    here = os.path.dirname(os.path.abspath(__file__))
    cc = next((shutil.which(c) for c in [os.environ.get("CC") or "cc", "gcc", "clang"] if c and shutil.which(c)), None)
    if cc is None:
        pytest.skip("no C compiler (cc, gcc, clang or $CC) found")
    installed = os.path.join(os.path.dirname(akunu.__file__), "include")
    include = installed if os.path.exists(os.path.join(installed, "akunu", "whisper.h")) else \
        os.path.join(os.path.dirname(here), "include")
    lib_dir, exe = os.path.dirname(_lib_file()), str(tmp_path / "whisper_check")
    # (-Wno-comment: the program's own warnings fail the build; header strictness is test_c_api's)
    p = subprocess.run([cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-Wno-comment", "-pedantic", "-I", include,
                        os.path.join(here, "c_api", "whisper_check.c"), "-L", lib_dir, "-lakunu",
                        f"-Wl,-rpath,{lib_dir}", "-o", exe], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    py = _py_load(whisper_tiny_en_dir)
    path, _ = speech["weather"]
    for timestamps in (1, 0):
        out = subprocess.run([exe, whisper_tiny_en_dir, path, "-", str(timestamps)], capture_output=True, text=True,
                             timeout=300)
        assert out.returncode == 0, out.stderr
        rows = [line.split("\t") for line in out.stdout.splitlines()]
        want = py.transcribe(path, timestamps=bool(timestamps))
        segs = [(int(r[1]) / 1000, int(r[2]) / 1000, r[3], [int(t) for t in r[4].split()]) for r in rows
                if r[0] == "segment"]
        assert segs == _python_view(want)[1]
        assert [r[1:] for r in rows if r[0] == "callback"] == [[r[1], r[2], r[3]] for r in rows if r[0] == "segment"]
        assert [r[1] for r in rows if r[0] == "text"] == [want.text]
        stats = [r for r in rows if r[0] == "stats"][0]
        assert int(stats[2]) == len(want.segments) and stats[4] == "en"


# -- errors -----------------------------------------------------------------------------------

def _wav_bytes(samples=1600):
    data = (np.sin(np.arange(samples) / 5) * 8000).astype("<i2").tobytes()
    return (b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVEfmt " + struct.pack("<IHHIIHH", 16, 1, 1, 16000,
            32000, 2, 16) + b"data" + struct.pack("<I", len(data)) + data)


def test_errors(lib, random_paths, small_model, tmp_path):
    err = lambda: lib.akunu_last_error().decode()  # noqa: E731
    st, text = Stats(), c_char_p()
    audio, ptr = _floats(CLIPS["chirp"])
    # NULL and freed handles
    assert lib.akunu_transcribe_pcm(None, ptr, audio.size, None, ctypes.byref(st), ctypes.byref(text)) != 0
    assert "null model handle" in err()
    assert lib.akunu_is_whisper(None) == -1 and lib.akunu_set_timestamps(None, True) != 0
    c = CWhisper(lib, random_paths["gguf"])
    dead = CWhisper(lib, random_paths["gguf"])
    dead.close()
    assert lib.akunu_transcribe_pcm(dead.h, ptr, audio.size, None, ctypes.byref(st), ctypes.byref(text)) != 0
    assert "not a live model handle" in err()
    assert lib.akunu_transcript_segment_count(dead.h) == -1
    try:
        # a text model passed to the Whisper calls
        m = c_void_p()
        assert lib.akunu_load_model(small_model.encode(), None, ctypes.byref(m)) == 0
        try:
            assert lib.akunu_is_whisper(m) == 0
            assert lib.akunu_transcribe_pcm(m, ptr, audio.size, None, ctypes.byref(st), ctypes.byref(text)) != 0
            assert "not a Whisper model" in err()
            assert lib.akunu_set_timestamps(m, False) != 0 and "not a Whisper model" in err()
            assert lib.akunu_transcript_segment_count(m) == -1
        finally:
            lib.akunu_free_model(m)
        # the Whisper model passed to text-model calls: errors, not crashes
        ids = (c_int32 * 3)(50258, 50259, 50359)
        out, n_out, logits = (c_int32 * 8)(), c_int32(), (c_float * 10)()
        assert lib.akunu_generate(c.h, ids, 3, 4, None, None, 0, out, ctypes.byref(n_out)) != 0
        assert "Whisper" in err() and "akunu_generate" in err()
        assert lib.akunu_logits(c.h, ids, 3, logits) != 0 and "Whisper" in err()
        assert lib.akunu_get_position(c.h) == -1 and "Whisper" in err()
        if hasattr(lib, "akunu_encode"):  # tokenization (include/akunu/text.h) goes through the same check
            f = lib.akunu_encode
            f.restype, f.argtypes = c_int32, [c_void_p, c_char_p, c_bool, P(c_int32), c_int32, P(c_int32)]
            assert f(c.h, b"hello", False, out, 8, ctypes.byref(n_out)) != 0 and "Whisper" in err()
        # what inspection reads works on a Whisper model
        assert lib.akunu_is_whisper(c.h) == 1
        assert lib.akunu_tensor_count(c.h) > 10 and lib.akunu_tensor_name(c.h, 0)
        assert lib.akunu_model_memory(c.h) > 0

        class Config(ctypes.Structure):
            _fields_ = [(n, c_int32) for n in ("dim", "n_layers", "n_heads", "n_kv_heads", "head_dim", "ffn_dim",
                                               "vocab_size", "context_length", "n_ctx")] + \
                       [("norm_eps", c_float), ("rope_base", c_float), ("architecture", ctypes.c_char * 32)]

        cfg = Config()
        assert lib.akunu_get_config(c.h, ctypes.byref(cfg)) == 0, err()
        assert (cfg.architecture, cfg.dim, cfg.n_layers, cfg.vocab_size, cfg.n_ctx) == (b"whisper", 64, 2, 51865, 64)
        # unreadable, truncated and non-WAV files, empty audio
        bad = {"missing.wav": None, "empty.wav": b"", "short.wav": _wav_bytes()[:30],
               "text.wav": b"this is not audio at all" * 40, "dir": "dir",
               "flac.wav": b"fLaC" + b"\0" * 100, "nodata.wav": _wav_bytes()[:36]}
        messages = {"missing.wav": "does not exist", "empty.wav": "empty", "short.wav": "cannot read",
                    "text.wav": "cannot read", "dir": "does not exist", "flac.wav": "WAV",
                    "nodata.wav": "no data chunk"}
        for name, blob in bad.items():
            path = tmp_path / name
            if blob == "dir":
                path.mkdir()
            elif blob is not None:
                path.write_bytes(blob)
            for stream in (False, True):
                rc = (lib.akunu_transcribe_stream(c.h, str(path).encode(), None, None, SEGMENT_CB(), None, None)
                      if stream else lib.akunu_transcribe(c.h, str(path).encode(), None, ctypes.byref(st),
                                                          ctypes.byref(text)))
                assert rc != 0 and messages[name] in err(), (name, err())
        zero_samples = _wav_bytes(0)
        (tmp_path / "zero.wav").write_bytes(zero_samples)
        assert lib.akunu_transcribe(c.h, str(tmp_path / "zero.wav").encode(), None, ctypes.byref(st),
                                    ctypes.byref(text)) != 0 and "no samples" in err()
        assert lib.akunu_transcribe_pcm(c.h, ptr, 0, None, ctypes.byref(st), ctypes.byref(text)) != 0
        assert "no samples" in err()
        assert lib.akunu_transcribe_pcm(c.h, None, 100, None, ctypes.byref(st), ctypes.byref(text)) != 0
        nan, nan_ptr = _floats(np.full(1000, np.nan))
        assert lib.akunu_transcribe_pcm(c.h, nan_ptr, nan.size, None, None, ctypes.byref(text)) != 0
        assert "NaN" in err()
        # NULL out-pointers, unknown languages, bad temperatures, segment indices
        assert lib.akunu_transcribe_pcm(c.h, ptr, audio.size, None, ctypes.byref(st), None) != 0
        assert lib.akunu_transcribe(c.h, None, None, ctypes.byref(st), ctypes.byref(text)) != 0
        assert lib.akunu_transcribe_pcm(c.h, ptr, audio.size, b"xx", None, ctypes.byref(text)) != 0
        assert "unknown language" in err()
        assert lib.akunu_set_transcribe_temperatures(c.h, None, 1) != 0
        assert lib.akunu_set_transcribe_temperatures(c.h, (c_double * 1)(-1.0), 1) != 0
        assert lib.akunu_transcript_segment(c.h, 99, None, None, None, None, None) != 0
        # the handle still works after all that
        c.temperatures([0.0])
        assert lib.akunu_transcribe_pcm(c.h, ptr, audio.size, b"en", ctypes.byref(st), ctypes.byref(text)) == 0
        assert st.n_segments == lib.akunu_transcript_segment_count(c.h)
    finally:
        c.close()
