"""Models by their Hugging Face name (python/akunu/hub.py), without the network:
a Hugging Face cache built in tmp_path in the layout huggingface_hub documents
(models--owner--repo/blobs, snapshots/<commit>/ links, refs/), which
huggingface_hub.scan_cache_dir() reads back as valid, and a local fake of the
hub's endpoints for fetching. A repo id loads the same model as its path (same
greedy tokens); every error names the repo and says what to do."""

import hashlib
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import urllib.parse

import pytest

import akunu
from akunu import _core, hub
from akunu.cli import inspect as inspect_cli
from akunu.cli import pull as pull_cli
from akunu.model_zoo import resolve_model_path

huggingface_hub = pytest.importorskip("huggingface_hub")
hf_constants = pytest.importorskip("huggingface_hub.constants")

MODELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models")
PROMPT = [1, 5, 9, 33, 17]


def greedy(name, n=8, **kw):
    core = akunu.load(name, **kw)._core()
    first = core.prefill(PROMPT)
    return [first] + list(core.decode_greedy(first, n - 1, []))


def model_file(q):
    return os.path.join(MODELS, f"llama-{q}.gguf")


def _bytes(src):
    if isinstance(src, bytes):
        return src
    with open(src, "rb") as f:
        return f.read()


def commit_of(repo_id, rev):
    return hashlib.sha1(f"{repo_id}@{rev}".encode()).hexdigest()


def add_to_cache(cache, repo_id, files, rev="main", commit=None):
    """One revision of a repo in huggingface_hub's cache layout: each file a blob named by its
    sha256 (as an LFS file's), linked from snapshots/<commit>/ by a relative symlink; refs/<rev>."""
    commit = commit or commit_of(repo_id, rev)
    folder = os.path.join(str(cache), "models--" + repo_id.replace("/", "--"))
    for path, src in files.items():
        data = _bytes(src)
        blob = os.path.join(folder, "blobs", hashlib.sha256(data).hexdigest())
        os.makedirs(os.path.dirname(blob), exist_ok=True)
        if not os.path.exists(blob):
            with open(blob, "wb") as f:
                f.write(data)
        link = os.path.join(folder, "snapshots", commit, *path.split("/"))
        os.makedirs(os.path.dirname(link), exist_ok=True)
        os.symlink(os.path.relpath(blob, os.path.dirname(link)), link)
    if rev != commit:
        ref = os.path.join(folder, "refs", *rev.split("/"))
        os.makedirs(os.path.dirname(ref), exist_ok=True)
        with open(ref, "w") as f:
            f.write(commit)
    return commit


def assert_valid_cache(cache):
    info = huggingface_hub.scan_cache_dir(str(cache))
    assert not info.warnings, info.warnings
    return {r.repo_id: r for r in info.repos}


@pytest.fixture
def env(tmp_path, monkeypatch):
    """Every cache in tmp_path, offline, no token."""
    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_ENDPOINT", "HUGGINGFACE_HUB_CACHE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("LLAMA_CACHE", str(tmp_path / "llama.cpp"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("AKUNU_CACHE", str(tmp_path / "akunu"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    os.makedirs(tmp_path / "hub")
    return tmp_path


@pytest.fixture
def gguf_repo(env):
    add_to_cache(env / "hub", "tiny/llama-GGUF", {
        "llama-Q4_K_M.gguf": model_file("q4_k_m"), "llama-Q4_K_S.gguf": model_file("q4_k_s"),
        "llama-Q8_0.gguf": model_file("q8_0"), "mmproj-llama-F16.gguf": b"not a model", "README.md": b"# tiny"})
    return "tiny/llama-GGUF"


def split_model(out_dir, max_tensors=5):
    """A random llama F16 GGUF (one file) and the same model split by gguf-py's writer
    (llama.cpp's gguf-split layout): (file, [splits])."""
    import gguf

    from tests.fixtures import random_gguf

    shape = random_gguf.Shape(n_layers=1, dim=256, ffn_dim=256, vocab=300)
    os.makedirs(out_dir, exist_ok=True)
    whole = os.path.join(out_dir, "whole.gguf")
    random_gguf.write_model(whole, "llama", "F16", seed=3, shape=shape)

    class SplitWriter(gguf.GGUFWriter):
        def __init__(self, path, arch, **kw):
            super().__init__(path, arch, split_max_tensors=max_tensors, **kw)

    writer, sha = gguf.GGUFWriter, random_gguf.sha256_of
    gguf.GGUFWriter, random_gguf.sha256_of = SplitWriter, lambda p: None
    try:
        random_gguf.write_model(os.path.join(out_dir, "llama-F16.gguf"), "llama", "F16", seed=3, shape=shape)
    finally:
        gguf.GGUFWriter, random_gguf.sha256_of = writer, sha
    splits = sorted(os.path.join(out_dir, f) for f in os.listdir(out_dir) if "-of-" in f)
    assert len(splits) > 1
    return whole, splits


# --------------------------------------------------------------------------- names


def test_repo_id_shapes():
    p = hub.parse_repo_id
    assert p("owner/repo") == hub.RepoSpec("owner/repo")
    assert p("owner/repo:q4_k_m") == hub.RepoSpec("owner/repo", quant="q4_k_m")
    assert p("owner/repo/sub/m-Q8_0.gguf") == hub.RepoSpec("owner/repo", filename="sub/m-Q8_0.gguf")
    assert p("owner/repo@v1:Q8_0") == p("owner/repo:Q8_0@v1") == hub.RepoSpec("owner/repo", "v1", "Q8_0")
    assert p("owner/repo/m.gguf@dev") == hub.RepoSpec("owner/repo", "dev", filename="m.gguf")
    assert p("owner/repo", revision="abc") == hub.RepoSpec("owner/repo", "abc")
    for path in ("gemma3-270m", "model.gguf", "dir/model.gguf", "/abs/model.gguf", "./a/b", "path/to/Qwen3-0.6B",
                 "~/m/x", "a/b--c", "a/.b", "owner/repo:bad quant", ""):
        assert p(path) is None, path
    with pytest.raises(akunu.AkunuError, match="revision"):
        p("owner/repo@v1", revision="v2")


def test_quant_matching_is_llama_cpp_s():
    assert hub.quant_of("sub/gemma-3-270m-it-Q4_K_M.gguf") == "Q4_K_M"
    assert hub.quant_of("m.q8_0-00002-of-00003.gguf") == "Q8_0"
    assert hub._matches_quant("m-Q4_K_M.gguf", "q4_k_m")
    assert not hub._matches_quant("m-Q4_K_M.gguf", "Q4_K")  # a prefix of another quant is not it
    assert not hub._matches_quant("m-IQ4_XS.gguf", "Q4_XS")
    assert hub._matches_quant("Q4_K_M/m-Q4_K_M-00001-of-00002.gguf", "Q4_K_M")


# --------------------------------------------------------------------------- from the cache


def test_cache_layout_reads_back_valid(gguf_repo, env):
    repos = assert_valid_cache(env / "hub")
    (rev,) = repos[gguf_repo].revisions
    assert rev.refs == {"main"} and len(rev.files) == 5


def test_gguf_repo_loads_as_its_path(gguf_repo):
    assert os.path.basename(resolve_model_path(gguf_repo)) == "llama-Q4_K_M.gguf"  # the default
    assert greedy(gguf_repo) == greedy(model_file("q4_k_m"))
    assert greedy(gguf_repo + ":q8_0") == greedy(model_file("q8_0"))  # the quant in any case
    assert greedy(gguf_repo + "/llama-Q4_K_S.gguf") == greedy(model_file("q4_k_s"))
    assert greedy(gguf_repo + "/llama-q4_k_s.gguf") == greedy(model_file("q4_k_s"))


@pytest.mark.parametrize("quant", ["Q5_K_M", "Q4_K", "F16"])
def test_quant_the_repo_lacks(gguf_repo, quant):
    with pytest.raises(akunu.AkunuError, match=f"tiny/llama-GGUF.*no {quant} GGUF.*Q4_K_M, Q4_K_S, Q8_0"):
        akunu.load(f"{gguf_repo}:{quant}")


def test_default_quant(env):
    add_to_cache(env / "hub", "tiny/two-GGUF", {"m-Q8_0.gguf": model_file("q8_0"), "m-Q4_0.gguf": model_file("q4_0")})
    with pytest.raises(akunu.AkunuError, match=r"tiny/two-GGUF .*no Q4_K_M.*tiny/two-GGUF:QUANT \(Q4_0, Q8_0\)"):
        akunu.load("tiny/two-GGUF")
    # one model (the projector beside it is none): that one
    add_to_cache(env / "hub", "tiny/one-GGUF", {"m-Q8_0.gguf": model_file("q8_0"), "mmproj-m-f16.gguf": b"x"})
    assert greedy("tiny/one-GGUF") == greedy(model_file("q8_0"))


def test_split_gguf(env):
    whole, splits = split_model(str(env / "made"))
    add_to_cache(env / "hub", "tiny/split-GGUF", {os.path.basename(p): p for p in splits})
    want = greedy(whole)
    path = resolve_model_path("tiny/split-GGUF")  # one model: the split set
    assert path.startswith(str(env / "akunu")) and greedy("tiny/split-GGUF:f16") == want
    a, b = _core.read_gguf(path), _core.read_gguf(whole)
    assert a["tensors"] == b["tensors"] and a["metadata"] == b["metadata"] and a["file_size"] == b["file_size"]
    assert resolve_model_path("tiny/split-GGUF:F16") == path  # joined once
    # a path to the first split (or any split) loads the set
    assert greedy(splits[0]) == want and greedy(splits[-1]) == want
    os.unlink(splits[1])
    with pytest.raises(akunu.AkunuError, match=os.path.basename(splits[1])):
        akunu.load(splits[0])
    # a split set only partly in the cache
    add_to_cache(env / "hub", "tiny/part-GGUF", {os.path.basename(splits[0]): splits[0]})
    with pytest.raises(akunu.AkunuError, match=r"tiny/part-GGUF.*only 1 of the \d splits.*00002-of"):
        akunu.load("tiny/part-GGUF:F16")


def test_hostile_split_is_a_clear_error(env):
    _, splits = split_model(str(env / "made"))
    with open(splits[1], "r+b") as f:
        f.truncate(40)
    with pytest.raises(akunu.ModelFormatError, match="not a GGUF split"):
        akunu.load(splits[0])
    assert not os.path.exists(env / "akunu" / "gguf-joined") or not any(
        f.endswith(".tmp") for _, _, fs in os.walk(env / "akunu") for f in fs)


def test_revisions(env):
    main = add_to_cache(env / "hub", "tiny/rev-GGUF", {"m-Q4_K_M.gguf": model_file("q4_k_m")})
    v1 = add_to_cache(env / "hub", "tiny/rev-GGUF", {"m-Q4_K_M.gguf": model_file("q8_0")}, rev="v1")
    assert_valid_cache(env / "hub")
    assert main != v1
    assert greedy("tiny/rev-GGUF") == greedy(model_file("q4_k_m"))
    assert greedy("tiny/rev-GGUF@v1") == greedy(model_file("q8_0"))
    assert greedy("tiny/rev-GGUF:Q4_K_M@v1") == greedy(model_file("q8_0"))
    assert greedy(resolve_model_path("tiny/rev-GGUF", revision=v1)) == greedy(model_file("q8_0"))
    assert greedy("tiny/rev-GGUF", revision="v1") == greedy(model_file("q8_0"))  # akunu.load's revision=
    assert greedy(f"tiny/rev-GGUF@{main}") == greedy(model_file("q4_k_m"))
    with pytest.raises(akunu.AkunuError, match="tiny/rev-GGUF@v2.*not in the Hugging Face cache.*HF_HUB_OFFLINE"):
        akunu.load("tiny/rev-GGUF@v2")


@pytest.fixture(scope="module")
def hf_dirs(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from tests.fixtures.hf_models import make_decoder, mlx_quantize_dir

    base = tmp_path_factory.mktemp("hf")
    plain, quant = str(base / "llama"), str(base / "llama-4bit")
    make_decoder("llama", plain, seed=5)
    mlx_quantize_dir(plain, quant, 4, 32)
    return plain, quant


@pytest.mark.parametrize("which", ["plain", "mlx-4bit"])
def test_directory_repo_loads_as_its_path(env, hf_dirs, which):
    src = hf_dirs[0 if which == "plain" else 1]
    files = {f: os.path.join(src, f) for f in os.listdir(src)}
    files["pytorch_model.bin"] = b"not loaded"
    add_to_cache(env / "hub", f"tiny/llama-{which}", files)
    assert_valid_cache(env / "hub")
    path = resolve_model_path(f"tiny/llama-{which}")
    assert os.path.isdir(path) and os.path.basename(os.path.dirname(path)) == "snapshots"
    assert greedy(f"tiny/llama-{which}") == greedy(src)
    with pytest.raises(akunu.AkunuError, match=f"tiny/llama-{which}.*no GGUF file.*load it as 'tiny/llama-{which}'"):
        akunu.load(f"tiny/llama-{which}:Q4_K_M")


def test_ctranslate2_repo(env):
    files = {"config.json": b"{}", "model.bin": b"ct2", "tokenizer.json": b"{}", "vocabulary.txt": b"a",
             "README.md": b"#"}
    add_to_cache(env / "hub", "tiny/faster-whisper", files)
    path = resolve_model_path("tiny/faster-whisper")
    assert sorted(os.listdir(path)) == sorted(files)
    p = hub.plan(hub.parse_repo_id("tiny/faster-whisper"))
    assert p.kind == "ctranslate2" and "README.md" not in p.files and "model.bin" in p.files


def test_directory_partly_cached(env):
    add_to_cache(env / "hub", "tiny/half", {"config.json": b"{}", "model.safetensors": b"x"})
    with pytest.raises(akunu.AkunuError, match="tiny/half.*no tokenizer.json"):
        akunu.load("tiny/half")


def test_no_supported_weights(env):
    add_to_cache(env / "hub", "tiny/torch-only", {"config.json": b"{}", "pytorch_model.bin": b"x"})
    with pytest.raises(akunu.AkunuError, match="tiny/torch-only.*no weights akunu loads.*pytorch_model.bin"):
        akunu.load("tiny/torch-only")


def test_not_cached_offline(env):
    with pytest.raises(akunu.AkunuError, match="'nobody/nothing' is not in the Hugging Face cache.*HF_HUB_OFFLINE"
                                               ".*akunu-pull nobody/nothing"):
        akunu.load("nobody/nothing")


def test_paths_and_named_models_win(gguf_repo, env, monkeypatch):
    monkeypatch.chdir(env)
    os.makedirs("tiny")
    shutil.copy(model_file("q4_0"), "tiny/llama-GGUF")  # a file by the repo's name: the file
    assert resolve_model_path("tiny/llama-GGUF") == "tiny/llama-GGUF"
    assert greedy("tiny/llama-GGUF") == greedy(model_file("q4_0"))
    with pytest.raises(akunu.AkunuError, match="does not exist"):
        akunu.load("missing/dir/model")
    from akunu import model_zoo

    monkeypatch.setattr(model_zoo, "assemble_whisper_base", lambda: "assembled")
    assert resolve_model_path("whisper-base") == "assembled"


def test_llama_cpp_cache(env):
    os.makedirs(env / "llama.cpp")
    flat = env / "llama.cpp" / "tiny_lc-GGUF_lc-Q4_K_M.gguf"  # llama.cpp -hf's own name for it
    shutil.copy(model_file("q4_k_m"), flat)
    assert resolve_model_path("tiny/lc-GGUF") == str(flat)
    assert greedy("tiny/lc-GGUF:Q4_K_M") == greedy(model_file("q4_k_m"))


def test_import_akunu_leaves_huggingface_hub_out():
    code = "import sys, akunu; akunu.load; assert 'huggingface_hub' not in sys.modules, 'imported'"
    subprocess.run([sys.executable, "-c", code], check=True, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))


def test_pull_and_inspect_cli_offline(gguf_repo, capsys):
    assert pull_cli.main([gguf_repo + ":Q8_0"]) == 0
    out, err = capsys.readouterr()
    assert out.strip().endswith("llama-Q8_0.gguf") and os.path.isfile(out.strip())
    assert pull_cli.main([gguf_repo, "--dry-run"]) == 0
    assert "llama-Q4_K_M.gguf" in capsys.readouterr().out
    assert pull_cli.main(["nobody/nothing"]) == 1
    assert "akunu-pull: error: 'nobody/nothing' is not in the Hugging Face cache" in capsys.readouterr().err
    assert inspect_cli.main([gguf_repo, "--no-tensors"]) == 0
    out = capsys.readouterr().out
    assert "not asked (HF_HUB_OFFLINE=1)" in out and "Q8_0" in out and "'tiny/llama-GGUF' loads GGUF Q4_K_M" in out
    assert "architecture" in out  # the cached model's own summary follows
    assert inspect_cli.main([gguf_repo + ":Q2_K", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert "no Q2_K GGUF" in d["hub"]["loads"]["error"] and d["model"] is None
    assert [m["quant"] for m in d["hub"]["gguf_models"]] == ["Q4_K_M", "Q4_K_S", "Q8_0"]


# --------------------------------------------------------------------------- from a fake hub


class FakeHub:
    """The hub's endpoints that huggingface_hub calls to fetch (model_info, HEAD/GET of
    /resolve/), for repos held in memory. `cut`: files whose download breaks off half-way
    (and whose retries the server then refuses)."""

    def __init__(self):
        self.repos, self.log, self.cut, self.token = {}, [], set(), "hf_good"
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.server.hub = self
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def add(self, repo_id, files, rev="main", gated=False):
        repo = self.repos.setdefault(repo_id, {"refs": {}, "commits": {}, "gated": gated})
        commit = commit_of(repo_id, rev)
        repo["refs"][rev] = commit
        repo["commits"][commit] = {k: _bytes(v) for k, v in files.items()}
        return commit

    def gets(self, suffix=""):
        return [p for m, p in self.log if m == "GET" and "/resolve/" in p and p.endswith(suffix)]


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):
        self._serve(True)

    def do_HEAD(self):
        self._serve(False)

    def _reply(self, status, headers, body=b"", send=True):
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, str(v))
        self.end_headers()
        if send:
            self.wfile.write(body)

    def _error(self, status, code, send):
        body = json.dumps({"error": code}).encode()
        self._reply(status, {"X-Error-Code": code, "X-Error-Message": code, "Content-Type": "application/json",
                             "Content-Length": len(body)}, body, send)

    def _serve(self, send):
        hub_ = self.server.hub
        url = urllib.parse.urlsplit(self.path)
        parts = [urllib.parse.unquote(p) for p in url.path.split("/")[1:]]
        hub_.log.append((self.command, url.path))
        api = parts[:2] == ["api", "models"]
        repo_id = "/".join(parts[2:4] if api else parts[0:2])
        repo = hub_.repos.get(repo_id)
        if repo is None:
            return self._error(401, "RepoNotFound", send)
        rev = (parts[5] if len(parts) > 5 and parts[4] == "revision" else "main") if api else parts[3]
        commit = rev if rev in repo["commits"] else repo["refs"].get(rev)
        if commit is None:
            return self._error(404, "RevisionNotFound", send)
        files = repo["commits"][commit]
        if api:
            body = json.dumps({
                "id": repo_id, "sha": commit, "private": False, "gated": "manual" if repo["gated"] else False,
                "author": repo_id.split("/")[0], "downloads": 0, "likes": 0, "tags": [], "disabled": False,
                "siblings": [{"rfilename": k, "size": len(v), "blobId": hashlib.sha1(v).hexdigest(),
                              "lfs": {"sha256": hashlib.sha256(v).hexdigest(), "size": len(v), "pointerSize": 130}}
                             for k, v in sorted(files.items())]}).encode()
            return self._reply(200, {"Content-Type": "application/json", "Content-Length": len(body)}, body, send)
        path = "/".join(parts[4:])
        if repo["gated"] and self.headers.get("Authorization") != f"Bearer {hub_.token}":
            return self._error(401, "GatedRepo", send)
        if path not in files:
            return self._error(404, "EntryNotFound", send)
        data = files[path]
        headers = {"X-Repo-Commit": commit, "ETag": f'"{hashlib.sha256(data).hexdigest()}"',
                   "Accept-Ranges": "bytes", "Content-Length": len(data)}
        ranged = self.headers.get("Range")
        if path in hub_.cut and send:
            if len(hub_.gets(path)) > 1:  # the outage goes on: retries and resumptions fail
                return self._error(500, "Unavailable", send)
            self._reply(200, headers, data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if ranged and send:
            start = int(ranged.split("=")[1].split("-")[0])
            headers.update({"Content-Length": len(data) - start,
                            "Content-Range": f"bytes {start}-{len(data) - 1}/{len(data)}"})
            return self._reply(206, headers, data[start:], send)
        self._reply(200, headers, data, send)


@pytest.fixture
def online(env, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE")
    # huggingface_hub reads HF_HUB_OFFLINE once, at import: as this process may have had it then
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)


@pytest.fixture
def fake_hub(online, monkeypatch):
    h = FakeHub()
    monkeypatch.setenv("HF_ENDPOINT", h.url)
    yield h
    h.server.shutdown()
    h.server.server_close()


def cache_files(env, repo_id):
    folder = env / "hub" / ("models--" + repo_id.replace("/", "--"))
    blobs = sorted(os.listdir(folder / "blobs")) if (folder / "blobs").is_dir() else []
    snaps = {c: sorted(hub._walk(str(folder / "snapshots" / c))) for c in os.listdir(folder / "snapshots")} \
        if (folder / "snapshots").is_dir() else {}
    return blobs, snaps


def test_fetch_only_the_chosen_gguf(env, fake_hub):
    commit = fake_hub.add("tiny/llama-GGUF", {
        "llama-Q4_K_M.gguf": model_file("q4_k_m"), "llama-Q8_0.gguf": model_file("q8_0"),
        "llama-Q4_K_S.gguf": model_file("q4_k_s"), "README.md": b"# tiny"})
    assert pull_cli.main(["tiny/llama-GGUF:Q8_0"]) == 0
    blobs, snaps = cache_files(env, "tiny/llama-GGUF")
    assert len(blobs) == 1 and snaps == {commit: ["llama-Q8_0.gguf"]}
    repos = assert_valid_cache(env / "hub")
    assert {r.commit_hash: r.refs for r in repos["tiny/llama-GGUF"].revisions} == {commit: {"main"}}
    assert fake_hub.gets() == ["/tiny/llama-GGUF/resolve/" + commit + "/llama-Q8_0.gguf"]
    # loading by name (online) fetches nothing more; offline it comes from the cache
    assert greedy("tiny/llama-GGUF:Q8_0") == greedy(model_file("q8_0"))
    assert len(fake_hub.gets()) == 1
    os.environ["HF_HUB_OFFLINE"] = "1"
    n = len(fake_hub.log)
    assert greedy("tiny/llama-GGUF:q8_0") == greedy(model_file("q8_0"))
    assert len(fake_hub.log) == n  # offline: not one request
    # online again: the default quant is fetched and loaded
    del os.environ["HF_HUB_OFFLINE"]
    assert greedy("tiny/llama-GGUF") == greedy(model_file("q4_k_m"))
    with pytest.raises(akunu.AkunuError, match=r"tiny/llama-GGUF has no Q5_K_M GGUF; it has Q4_K_M, Q4_K_S, Q8_0"):
        akunu.load("tiny/llama-GGUF:Q5_K_M")


def test_fetch_a_directory_needs_only_its_files(env, fake_hub):
    fake_hub.add("tiny/dir", {"config.json": b"{}", "model.safetensors": b"weights", "tokenizer.json": b"{}",
                              "tokenizer_config.json": b"{}", "1_Pooling/config.json": b"{}",
                              "pytorch_model.bin": b"torch", "onnx/model.onnx": b"onnx", "README.md": b"#",
                              "original/consolidated.safetensors": b"dup"})
    p, paths = hub.pull(hub.parse_repo_id("tiny/dir"))
    assert sorted(paths) == ["1_Pooling/config.json", "config.json", "model.safetensors", "tokenizer.json",
                             "tokenizer_config.json"]
    commit = p.commit
    assert cache_files(env, "tiny/dir")[1] == {commit: sorted(paths)}
    assert_valid_cache(env / "hub")


def test_fetch_sharded_directory_by_its_index(env, fake_hub):
    index = {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
    fake_hub.add("tiny/sharded", {"config.json": b"{}", "tokenizer.json": b"{}",
                                  "model.safetensors.index.json": json.dumps(index).encode(),
                                  "model-00001-of-00002.safetensors": b"1", "model-00002-of-00002.safetensors": b"2",
                                  "consolidated.safetensors": b"all of it again"})
    p, paths = hub.pull(hub.parse_repo_id("tiny/sharded"))
    assert "consolidated.safetensors" not in paths and "model-00002-of-00002.safetensors" in paths


def test_fetch_split_gguf(env, fake_hub):
    whole, splits = split_model(str(env / "made"))
    fake_hub.add("tiny/split-GGUF", {os.path.basename(p): p for p in splits} | {"other-Q8_0.gguf": whole})
    with pytest.raises(akunu.AkunuError, match="several GGUF models and no Q4_K_M"):
        akunu.load("tiny/split-GGUF")
    assert greedy("tiny/split-GGUF:F16") == greedy(whole)
    assert len(fake_hub.gets()) == len(splits)
    assert_valid_cache(env / "hub")


def test_llama_cpp_copy_is_not_fetched_again(env, fake_hub):
    fake_hub.add("tiny/lc-GGUF", {"lc-Q4_K_M.gguf": model_file("q4_k_m")})
    os.makedirs(env / "llama.cpp")
    flat = env / "llama.cpp" / "tiny_lc-GGUF_lc-Q4_K_M.gguf"
    shutil.copy(model_file("q4_k_m"), flat)
    assert resolve_model_path("tiny/lc-GGUF") == str(flat)
    assert fake_hub.gets() == []
    with open(flat, "ab") as f:  # a stale copy (another size) is not used
        f.write(b"x")
    assert resolve_model_path("tiny/lc-GGUF") != str(flat) and len(fake_hub.gets()) == 1


def test_gated_repo(env, fake_hub, monkeypatch):
    fake_hub.add("tiny/gated-GGUF", {"m-Q4_K_M.gguf": model_file("q4_k_m")}, gated=True)
    no_token = hub._token() is None
    with pytest.raises(akunu.AkunuError, match="tiny/gated-GGUF is gated.*HF_TOKEN"):
        akunu.load("tiny/gated-GGUF")
    if no_token:
        assert fake_hub.gets() == []  # refused before any download
    monkeypatch.setenv("HF_TOKEN", "hf_wrong")
    with pytest.raises(akunu.AkunuError, match="tiny/gated-GGUF is gated and the token in HF_TOKEN has no access"):
        akunu.load("tiny/gated-GGUF")
    monkeypatch.setenv("HF_TOKEN", "hf_good")
    assert greedy("tiny/gated-GGUF") == greedy(model_file("q4_k_m"))


def test_hub_errors_name_the_repo(env, fake_hub):
    fake_hub.add("tiny/llama-GGUF", {"m-Q4_K_M.gguf": model_file("q4_k_m")})
    fake_hub.add("tiny/dir", {"config.json": b"{}", "model.safetensors": b"w", "tokenizer.json": b"{}"})
    fake_hub.add("tiny/nothing", {"README.md": b"#"})
    for name, match in [
            ("nobody/nothing", "'nobody/nothing' is not a file or directory here, and .* has no repo nobody/nothing"),
            ("tiny/llama-GGUF@v9", "tiny/llama-GGUF has no revision 'v9'"),
            ("tiny/llama-GGUF/absent.gguf", "tiny/llama-GGUF has no file absent.gguf; its GGUF files: m-Q4_K_M"),
            ("tiny/dir:Q4_K_M", "tiny/dir has no GGUF file: it is a model directory, load it as 'tiny/dir'"),
            ("tiny/nothing", "tiny/nothing has no weights akunu loads.*README.md")]:
        with pytest.raises(akunu.AkunuError, match=match):
            akunu.load(name)
    assert fake_hub.gets() == []


def test_disk_too_small_is_checked_before_fetching(env, fake_hub, monkeypatch):
    fake_hub.add("tiny/llama-GGUF", {"m-Q4_K_M.gguf": model_file("q4_k_m")})
    monkeypatch.setattr(hub, "free_bytes", lambda path: 1000)
    with pytest.raises(akunu.AkunuError, match=r"fetching tiny/llama-GGUF needs .* MiB but .* has 0.0 MiB free"
                                               r".*HF_HUB_CACHE"):
        akunu.load("tiny/llama-GGUF")
    assert fake_hub.gets() == []


def test_interrupted_fetch_leaves_no_partial_file(env, fake_hub):
    commit = fake_hub.add("tiny/llama-GGUF", {"m-Q4_K_M.gguf": model_file("q4_k_m")})
    fake_hub.cut.add("m-Q4_K_M.gguf")
    with pytest.raises(akunu.AkunuError, match="m-Q4_K_M.gguf of tiny/llama-GGUF .* failed"):
        akunu.load("tiny/llama-GGUF")
    blobs, snaps = cache_files(env, "tiny/llama-GGUF")
    # what a broken download leaves is the library's own *.incomplete (if anything), never a blob or a snapshot file
    assert all(b.endswith(".incomplete") for b in blobs) and not any(snaps.values())
    assert_valid_cache(env / "hub")
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        with pytest.raises(akunu.AkunuError, match="not in the Hugging Face cache"):
            akunu.load("tiny/llama-GGUF")
    finally:
        del os.environ["HF_HUB_OFFLINE"]
    fake_hub.cut.clear()
    path = resolve_model_path("tiny/llama-GGUF")
    assert _bytes(path) == _bytes(model_file("q4_k_m"))
    assert cache_files(env, "tiny/llama-GGUF")[1] == {commit: ["m-Q4_K_M.gguf"]}


def test_unreachable_hub_uses_the_cache(env, online, monkeypatch):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    with pytest.raises(akunu.AkunuError, match=r"'tiny/llama-GGUF' is not in the Hugging Face cache .* cannot be "
                                               r"reached.*connect to the network"):
        akunu.load("tiny/llama-GGUF")
    add_to_cache(env / "hub", "tiny/llama-GGUF", {"m-Q4_K_M.gguf": model_file("q4_k_m")})
    assert greedy("tiny/llama-GGUF") == greedy(model_file("q4_k_m"))


def test_inspect_online(env, fake_hub, capsys):
    fake_hub.add("tiny/llama-GGUF", {"m-Q4_K_M.gguf": model_file("q4_k_m"), "m-Q8_0.gguf": model_file("q8_0")})
    assert inspect_cli.main(["tiny/llama-GGUF", "--no-tensors"]) == 0
    out = capsys.readouterr().out
    assert "the repo holds" in out and "m-Q8_0.gguf" in out and "to fetch on first load" in out
    assert "architecture" not in out and fake_hub.gets() == []  # inspecting downloads nothing
    assert pull_cli.main(["tiny/llama-GGUF"]) == 0
    capsys.readouterr()
    assert inspect_cli.main(["tiny/llama-GGUF", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["hub"]["loads"]["cached"] and d["hub"]["repo_files"]["m-Q4_K_M.gguf"]["cached"] == "hf"
    assert d["hub"]["repo_files"]["m-Q8_0.gguf"]["cached"] is None and d["model"]["model"]["architecture"] == "llama"
