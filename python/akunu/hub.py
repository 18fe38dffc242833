"""Models by their Hugging Face name, fetched through ``huggingface_hub``.

A repo id names a model wherever a path does (``akunu.load``, every CLI):

- ``owner/repo``: a safetensors / MLX directory (config.json + weights +
  tokenizer.json), a CTranslate2 directory (model.bin), or a GGUF repo: its
  Q4_K_M file by default, or its only model when it holds one;
- ``owner/repo:QUANT``: the GGUF whose file name carries QUANT (case-insensitive,
  as llama.cpp's ``-hf`` matches it); ``owner/repo/FILE.gguf``: that file;
- ``@REV`` after the repo (``owner/repo@v1.0``, ``owner/repo:Q8_0@<commit>``): a
  branch, tag or commit.

Split GGUFs (``-00001-of-0000N.gguf``) are fetched whole and joined into one
file (gguf_splits.py), which akunu's loader maps.

Files go into the standard cache (``HF_HUB_CACHE`` / ``HF_HOME``), only those the
model needs, so a model that transformers, vLLM or mlx-lm already fetched is not
fetched again; a GGUF that llama.cpp's ``-hf`` left in its own cache
(``LLAMA_CACHE``, ``~/.cache/llama.cpp``) is used where it lies. ``HF_TOKEN``
opens gated repos; ``HF_HUB_OFFLINE=1`` resolves from the caches alone.

``import huggingface_hub`` happens only when a repo id is resolved.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from .errors import AkunuError
from .gguf_splits import SPLIT_NAME as _SPLIT, free_bytes, gib as _gib, join_gguf_splits

DEFAULT_QUANT = "Q4_K_M"

# Hugging Face names: letters, digits, '_', '.', '-'; no '--' or '..'; '.' and '-' neither first nor last
_REPO_PART = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?")
_QUANT = re.compile(r"[A-Za-z0-9_]+(?:[.-][A-Za-z0-9_]+)*")
_COMMIT = re.compile(r"[0-9a-f]{40}")
# GGUFs that are not a model of their own (llama.cpp's -hf leaves them out the same way)
_NOT_A_MODEL = ("mmproj", "imatrix", "mtp-", "eagle3-", "dflash-", "dspark-")
# what a safetensors / MLX or CTranslate2 directory needs besides its weights (those it lacks are skipped)
_DIRECTORY_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                    "special_tokens_map.json", "chat_template.jinja", "chat_template.json",
                    "preprocessor_config.json", "modules.json", "sentence_bert_config.json",
                    "config_sentence_transformers.json")
_CT2_FILES = ("config.json", "model.bin", "tokenizer.json", "vocabulary.txt", "vocabulary.json",
              "preprocessor_config.json")
_POOLING = re.compile(r"\d+_Pooling/config\.json")


# --------------------------------------------------------------------------- names


@dataclass(frozen=True)
class RepoSpec:
    """A parsed repo id: ``owner/repo[/FILE.gguf][:QUANT][@REV]``."""

    repo_id: str
    revision: Optional[str] = None
    quant: Optional[str] = None
    filename: Optional[str] = None

    def __str__(self) -> str:
        s = self.repo_id + (f"/{self.filename}" if self.filename else "") + (f":{self.quant}" if self.quant else "")
        return s + (f"@{self.revision}" if self.revision else "")


def parse_repo_id(name, revision: Optional[str] = None) -> Optional[RepoSpec]:
    """The repo id `name` spells, or None where it has the shape of a path.
    `revision` (``revision=``) and ``@REV`` in the name must agree."""
    if not isinstance(name, str) or not name or name != name.strip():
        return None
    if name.startswith(("/", ".", "~")) or "\\" in name or "//" in name:
        return None
    s, rev, quant = name, None, None
    if "@" in s:
        s, _, tail = s.partition("@")
        rev, colon, q = tail.partition(":")  # git refs cannot hold ':', so a revision ends there
        if colon:
            quant = q
        if "/" in rev and rev.lower().endswith(".gguf"):  # owner/repo@REV/FILE.gguf
            rev, _, path = rev.partition("/")
            s = f"{s}/{path}"
        if not rev or "@" in rev:
            return None
    if ":" in s:
        if quant is not None:
            return None
        s, _, quant = s.partition(":")
    parts = s.split("/")
    if len(parts) < 2 or not all(parts):
        return None
    owner, repo, rest = parts[0], parts[1], parts[2:]
    for p in (owner, repo):
        if len(p) > 96 or not _REPO_PART.fullmatch(p) or "--" in p or ".." in p:
            return None
    filename = "/".join(rest) or None
    if filename is None and repo.lower().endswith(".gguf"):
        return None  # dir/model.gguf: a path that is not there
    if filename is not None and (not filename.lower().endswith(".gguf") or quant is not None or ".." in rest):
        return None  # path/to/a/directory
    if quant is not None and not _QUANT.fullmatch(quant):
        return None
    if revision is not None:
        if rev is not None and rev != revision:
            raise AkunuError(f"'{name}' names revision '{rev}' but revision='{revision}' was given")
        rev = revision
    return RepoSpec(f"{owner}/{repo}", rev, quant, filename)


def quant_of(path: str) -> str:
    """The quantization a GGUF's file name carries, upper-cased (llama.cpp's tag):
    'gemma-3-270m-it-Q4_K_M.gguf' -> 'Q4_K_M'."""
    base = path.rsplit("/", 1)[-1]
    m = _SPLIT.match(base)
    stem = m.group("prefix") if m else base[:-5] if base.lower().endswith(".gguf") else base
    t = re.search(r"[-.]([A-Za-z0-9_]+)$", stem)
    return (t.group(1) if t else stem).upper()


def _matches_quant(path: str, quant: str) -> bool:
    # Q4_K matches '-Q4_K.gguf' or '-Q4_K-00001-of-...' but not '-Q4_K_M.gguf'; Q4_XS not 'IQ4_XS'
    return re.search(r"(?<![A-Za-z0-9])" + re.escape(quant) + r"(?=[.\-/])", path, re.IGNORECASE) is not None


# --------------------------------------------------------------------------- caches


def _truthy(v: Optional[str]) -> bool:
    return (v or "").strip().upper() in ("1", "ON", "YES", "TRUE")


def offline() -> bool:
    """HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) as the environment has it now, or as huggingface_hub
    read it when it was imported."""
    if _truthy(os.environ.get("HF_HUB_OFFLINE")) or _truthy(os.environ.get("TRANSFORMERS_OFFLINE")):
        return True
    constants = sys.modules.get("huggingface_hub.constants")
    return bool(getattr(constants, "HF_HUB_OFFLINE", False))


def _expand(p: str) -> str:
    return os.path.expanduser(os.path.expandvars(p))


def hf_cache_dir() -> str:
    """huggingface_hub's cache, as its constants compute it (read now, so a change of the
    environment after import counts)."""
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            return _expand(os.environ[var])
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return os.path.join(_expand(home), "hub")


def endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")


def llama_cpp_cache_dirs() -> List[str]:
    """Where llama.cpp's -hf keeps what it fetched: LLAMA_CACHE, else its platform default."""
    dirs = []
    if os.environ.get("LLAMA_CACHE"):
        dirs.append(_expand(os.environ["LLAMA_CACHE"]))
    if sys.platform == "darwin":
        dirs.append(_expand("~/Library/Caches/llama.cpp"))
    elif sys.platform == "win32":
        dirs.append(os.path.join(os.environ.get("LOCALAPPDATA", _expand("~")), "llama.cpp"))
    else:
        dirs.append(os.path.join(_expand(os.environ.get("XDG_CACHE_HOME") or "~/.cache"), "llama.cpp"))
    out: List[str] = []
    for d in dirs:
        if os.path.abspath(d) not in map(os.path.abspath, out):
            out.append(d)
    return out


def _repo_folder(root: str, repo_id: str) -> str:
    return os.path.join(root, "models--" + repo_id.replace("/", "--"))


def _snapshot(root: str, repo_id: str, revision: Optional[str]) -> Tuple[Optional[str], Optional[str]]:
    """(commit, snapshot directory) of `revision` in a cache of the hub's layout, or (None, None)."""
    folder = _repo_folder(root, repo_id)
    rev = revision or "main"
    if _COMMIT.fullmatch(rev):
        d = os.path.join(folder, "snapshots", rev)
        return (rev, d) if os.path.isdir(d) else (None, None)
    try:
        with open(os.path.join(folder, "refs", *rev.split("/")), encoding="utf-8") as f:
            commit = f.read().strip()
    except (OSError, UnicodeDecodeError):
        return None, None
    d = os.path.join(folder, "snapshots", commit)
    return (commit, d) if _COMMIT.fullmatch(commit) and os.path.isdir(d) else (None, None)


def _walk(d: str) -> Dict[str, str]:
    """Repo path -> local path of the complete files under a snapshot (a link whose blob is gone is not one)."""
    out = {}
    for dirpath, _, filenames in os.walk(d):
        for f in filenames:
            p = os.path.join(dirpath, f)
            if os.path.isfile(p):
                out[os.path.relpath(p, d).replace(os.sep, "/")] = p
    return out


def _llama_cpp_files(repo_id: str) -> Dict[str, str]:
    """GGUFs of `repo_id` in llama.cpp's caches: its flat names ('owner_repo_FILE.gguf', '/' as '_'),
    and the hub's layout newer llama.cpp writes under LLAMA_CACHE."""
    out: Dict[str, str] = {}
    flat = repo_id.replace("/", "_") + "_"
    for d in llama_cpp_cache_dirs():
        _, snap = _snapshot(d, repo_id, None)
        if snap:
            for k, p in _walk(snap).items():
                if k.lower().endswith(".gguf"):
                    out.setdefault(k, p)
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        for n in names:
            p = os.path.join(d, n)
            if n.startswith(flat) and n.lower().endswith(".gguf") and os.path.isfile(p):
                out.setdefault(n[len(flat):], p)
    return out


def _llama_cpp_copy(repo_id: str, path: str, size: Optional[int], found: Dict[str, str]) -> Optional[str]:
    for key in (path, path.replace("/", "_")):
        p = found.get(key)
        if p is not None and (size is None or os.path.getsize(p) == size):
            return p
    return None


@dataclass
class RepoFile:
    size: Optional[int] = None
    blob: Optional[str] = None   # the hub's blob id (LFS sha256 or git oid): its name under blobs/
    local: Optional[str] = None  # a complete copy here
    where: Optional[str] = None  # "hf" (the hub's cache) or "llama.cpp"; None: to download


def cached_files(repo_id: str, revision: Optional[str]) -> Tuple[Optional[str], Dict[str, RepoFile]]:
    """(commit, files) of what the caches hold of `repo_id` at `revision`."""
    commit, files = None, {}
    c, d = _snapshot(hf_cache_dir(), repo_id, revision)
    if d:
        commit = c
        files = {k: RepoFile(os.path.getsize(p), local=p, where="hf") for k, p in _walk(d).items()}
    if revision in (None, "main"):  # llama.cpp's flat names keep no revision
        flat = {k.replace("/", "_") for k in files}
        for k, p in _llama_cpp_files(repo_id).items():
            if k not in files and k not in flat:
                files[k] = RepoFile(os.path.getsize(p), local=p, where="llama.cpp")
    return commit, files


# --------------------------------------------------------------------------- the hub


def _hf():
    try:
        import huggingface_hub
    except ImportError:
        raise AkunuError("models by Hugging Face name need huggingface_hub: pip install 'huggingface_hub>=0.23'") \
            from None
    return huggingface_hub


def _token() -> Optional[str]:
    hf = _hf()
    get_token = getattr(hf, "get_token", None) or getattr(hf.utils, "get_token")
    return get_token()


def _is_network_error(e: BaseException) -> bool:
    if isinstance(e, (ConnectionError, TimeoutError)):
        return True
    names = {c.__name__ for c in type(e).__mro__}
    return bool(names & {"OfflineModeIsEnabled", "LocalEntryNotFoundError", "ConnectError", "ConnectTimeout",
                         "TimeoutException", "NetworkError", "TransportError", "ConnectionError", "ProxyError",
                         "SSLError", "RemoteProtocolError", "ReadTimeout", "Timeout"})


def _hub_error(e: BaseException, spec: RepoSpec, what: str = "") -> AkunuError:
    """An error of huggingface_hub as one line that says what to do."""
    u = _hf().utils
    repo, page = spec.repo_id, f"{endpoint()}/{spec.repo_id}"
    if isinstance(e, getattr(u, "GatedRepoError", ())):
        if _token():
            return AkunuError(f"the Hugging Face repo {repo} is gated and the token in HF_TOKEN has no access to it "
                              f"yet: request access at {page} (with the account of that token)")
        return _gated(repo)
    if isinstance(e, getattr(u, "RepositoryNotFoundError", ())):
        return AkunuError(f"'{spec}' is not a file or directory here, and {endpoint()} has no repo {repo} "
                          f"(check the name; a private repo needs HF_TOKEN)")
    if isinstance(e, getattr(u, "RevisionNotFoundError", ())):
        return AkunuError(f"the Hugging Face repo {repo} has no revision '{spec.revision}' (a branch, tag or commit)")
    if isinstance(e, getattr(u, "EntryNotFoundError", ())) and not _is_network_error(e):
        return AkunuError(f"the Hugging Face repo {repo} has no file {what or '(unknown)'} at revision "
                          f"'{spec.revision or 'main'}'")
    if _is_network_error(e):
        return AkunuError(f"fetching {what or spec} of {repo} from {endpoint()} failed ({type(e).__name__}: "
                          f"{_first_line(e)}); nothing partial is kept as the model: run it again to retry")
    return AkunuError(f"fetching {what or spec} of {repo} from {endpoint()} failed ({type(e).__name__}: "
                      f"{_first_line(e)}): run it again to retry")


def _gated(repo: str) -> AkunuError:
    return AkunuError(f"the Hugging Face repo {repo} is gated: accept its terms at {endpoint()}/{repo}, then set "
                      f"HF_TOKEN to a token of that account (or run `hf auth login`)")


def _first_line(e: BaseException) -> str:
    s = str(e).strip()
    return s.splitlines()[0] if s else type(e).__name__


def remote_files(spec: RepoSpec):
    """(commit, files, info) of the repo at spec.revision, from the hub's API."""
    info = _hf().HfApi(endpoint=endpoint()).model_info(spec.repo_id, revision=spec.revision, files_metadata=True)
    blobs = os.path.join(_repo_folder(hf_cache_dir(), spec.repo_id), "blobs")
    found = _llama_cpp_files(spec.repo_id) if spec.revision in (None, "main") else {}
    files: Dict[str, RepoFile] = {}
    for s in info.siblings or []:
        lfs = getattr(s, "lfs", None)
        sha = (lfs.get("sha256") if isinstance(lfs, dict) else getattr(lfs, "sha256", None)) if lfs else None
        lfs_size = (lfs.get("size") if isinstance(lfs, dict) else getattr(lfs, "size", None)) if lfs else None
        f = RepoFile(size=getattr(s, "size", None) or lfs_size, blob=sha or getattr(s, "blob_id", None))
        blob = os.path.join(blobs, f.blob) if f.blob else None
        if blob and os.path.isfile(blob) and (f.size is None or os.path.getsize(blob) == f.size):
            f.local, f.where = blob, "hf"
        elif s.rfilename.lower().endswith(".gguf"):
            p = _llama_cpp_copy(spec.repo_id, s.rfilename, f.size, found)
            if p:
                f.local, f.where = p, "llama.cpp"
        files[s.rfilename] = f
    return getattr(info, "sha", None), files, info


# --------------------------------------------------------------------------- choosing the files


@dataclass
class GGUFModel:
    """One model among a repo's GGUFs: a file, or a split set (in order)."""

    files: List[str]
    count: int = 1

    @property
    def complete(self) -> bool:
        return len(self.files) == self.count

    @property
    def quant(self) -> str:
        return quant_of(self.files[0])


def gguf_models(paths) -> List[GGUFModel]:
    singles: List[GGUFModel] = []
    sets: Dict[Tuple[str, int], Dict[int, str]] = {}
    for p in sorted(paths):
        base = p.rsplit("/", 1)[-1].lower()
        if not base.endswith(".gguf") or any(w in base for w in _NOT_A_MODEL):
            continue
        m = _SPLIT.match(p)
        if m and int(m.group("count")) > 1:
            sets.setdefault((m.group("prefix"), int(m.group("count"))), {})[int(m.group("index"))] = p
        else:
            singles.append(GGUFModel([p]))
    for (_, n), parts in sorted(sets.items()):
        singles.append(GGUFModel([parts[i] for i in sorted(parts) if 1 <= i <= n], n))
    return singles


def _split_set(files: Dict[str, RepoFile], path: str) -> GGUFModel:
    m = _SPLIT.match(path)
    if not m or int(m.group("count")) <= 1:
        return GGUFModel([path])
    n = int(m.group("count"))
    names = [path[:m.start("index")] + f"{i:05d}" + path[m.end("index"):] for i in range(1, n + 1)]
    return GGUFModel([p for p in names if p in files], n)


@dataclass
class Plan:
    """What a repo id loads: the files to have here, and where they are."""

    spec: RepoSpec
    kind: str                # "gguf", "safetensors" (Hugging Face / MLX directory) or "ctranslate2"
    files: List[str]         # repo paths
    weights: List[str]       # the weight files among them (a GGUF's splits in order)
    repo_files: Dict[str, RepoFile]
    commit: Optional[str]
    online: bool
    gated: bool = False
    note: str = ""           # why the plan comes from the caches alone

    @property
    def to_download(self) -> List[str]:
        return [p for p in self.files if self.repo_files[p].where is None]

    @property
    def download_bytes(self) -> int:
        return sum(self.repo_files[p].size or 0 for p in self.to_download)

    @property
    def quant(self) -> Optional[str]:
        return quant_of(self.weights[0]) if self.kind == "gguf" else None


def _holds(files: Dict[str, RepoFile], limit: int = 12) -> str:
    names = sorted(files)
    return ", ".join(names[:limit]) + (f", ... ({len(names)} files)" if len(names) > limit else "")


def _tags(models: Sequence[GGUFModel]) -> str:
    return ", ".join(dict.fromkeys(m.quant for m in models))


def _choose(spec: RepoSpec, files: Dict[str, RepoFile], read_json: Callable[[str], dict], whose: str):
    """(kind, files, weights) that `spec` names among `files`. `whose` words the listing in errors
    ('the Hugging Face repo X has' / 'the cached copy of X has')."""
    repo = spec.repo_id
    root = {p for p in files if "/" not in p}
    directory = "config.json" in root and ("model.safetensors" in root or "model.safetensors.index.json" in root)
    ct2 = "config.json" in root and "model.bin" in root
    models = gguf_models(files)

    if spec.filename is not None:
        path = spec.filename if spec.filename in files else next(
            (p for p in files if p.lower() == spec.filename.lower()), None)
        if path is None:
            ggufs = [m.files[0] for m in models]
            raise AkunuError(f"{whose} no file {spec.filename}" +
                             (f"; its GGUF files: {', '.join(ggufs)}" if ggufs else "; it holds no GGUF file"))
        chosen = _split_set(files, path)
    elif spec.quant is not None or not (directory or ct2):
        if not models:
            if spec.quant is None:
                raise AkunuError(f"{whose} no weights akunu loads (a GGUF, safetensors with config.json, or a "
                                 f"CTranslate2 model.bin): {_holds(files) or 'no files'}")
            hint = f": it is a model directory, load it as '{repo}'" if directory or ct2 else \
                f" ({_holds(files) or 'no files'})"
            raise AkunuError(f"{whose} no GGUF file{hint}")
        quant = spec.quant or DEFAULT_QUANT
        hits = [m for m in models if _matches_quant(m.files[0], quant)]
        if not hits and spec.quant is None and len(models) == 1:
            hits = models
        if not hits:
            if spec.quant is None:
                raise AkunuError(f"{whose} several GGUF models and no {DEFAULT_QUANT}: pick one as {repo}:QUANT "
                                 f"({_tags(models)}) or {repo}/FILE.gguf")
            raise AkunuError(f"{whose} no {spec.quant} GGUF; it has {_tags(models)}: name one as "
                             f"{repo}:{models[0].quant}")
        if len(hits) > 1:
            raise AkunuError(f"'{spec}' matches several GGUF models in {repo} "
                             f"({', '.join(m.files[0] for m in hits)}): name one as {repo}/FILE.gguf")
        chosen = hits[0]
    else:
        if "tokenizer.json" not in files:
            raise AkunuError(f"{whose} no tokenizer.json (akunu builds the tokenizer of a model directory from it)")
        if ct2 and not directory:
            return "ctranslate2", [p for p in _CT2_FILES if p in files], ["model.bin"]
        if "model.safetensors.index.json" in root:
            index = read_json("model.safetensors.index.json")
            wmap = index.get("weight_map") if isinstance(index, dict) else None
            if not isinstance(wmap, dict):
                raise AkunuError(f"{repo}'s model.safetensors.index.json has no weight_map")
            shards = list(dict.fromkeys(v for v in wmap.values() if isinstance(v, str)))
            if any("/" in s or ".." in s for s in shards):
                raise AkunuError(f"{repo}'s model.safetensors.index.json names a shard outside the directory")
            missing = [s for s in shards if s not in files]
            if missing:
                raise AkunuError(f"{whose} no {', '.join(missing)}, which model.safetensors.index.json names")
            weights = ["model.safetensors.index.json"] + shards
        else:
            weights = ["model.safetensors"]
        names = [p for p in _DIRECTORY_FILES if p in files] + sorted(p for p in files if _POOLING.fullmatch(p))
        return "safetensors", names + weights, weights

    if not chosen.complete:
        have = set(chosen.files)
        m = _SPLIT.match(chosen.files[0])
        missing = [p for p in (chosen.files[0][:m.start("index")] + f"{i:05d}" + chosen.files[0][m.end("index"):]
                               for i in range(1, chosen.count + 1)) if p not in have]
        raise AkunuError(f"{whose} only {len(chosen.files)} of the {chosen.count} splits of {chosen.quant} "
                         f"(missing {', '.join(missing)})")
    return "gguf", list(chosen.files), list(chosen.files)


def _not_cached(spec: RepoSpec, reason: str) -> AkunuError:
    return AkunuError(f"'{spec}' is not in the Hugging Face cache ({hf_cache_dir()}) and {reason}: "
                      f"{'unset HF_HUB_OFFLINE' if reason.startswith('HF_HUB_OFFLINE') else 'connect to the network'}"
                      f", or fetch it with `akunu-pull {spec}` where the network is and copy that cache here")


def plan_offline(spec: RepoSpec, reason: str = "HF_HUB_OFFLINE=1") -> Plan:
    """The plan from the caches alone (no network)."""
    commit, files = cached_files(spec.repo_id, spec.revision)
    if not files:
        raise _not_cached(spec, reason)

    def read_json(path: str) -> dict:
        try:
            with open(files[path].local, encoding="utf-8") as f:
                return json.load(f)
        except (OSError, ValueError) as e:
            raise AkunuError(f"cannot read the cached {path} of {spec.repo_id}: {e}") from None

    try:
        kind, names, weights = _choose(spec, files, read_json, f"the cached copy of {spec.repo_id} has")
    except AkunuError as e:
        raise AkunuError(f"{e} ({reason}: only the cache was looked at)") from None
    if kind != "gguf" and any(files[p].where != "hf" for p in names):
        raise _not_cached(spec, reason)
    return Plan(spec, kind, names, weights, files, commit, online=False, note=reason)


def plan(spec: RepoSpec) -> Plan:
    """What `spec` loads: from the hub's listing, or from the caches alone when HF_HUB_OFFLINE=1
    or the hub cannot be reached."""
    if offline():
        return plan_offline(spec)
    try:
        commit, files, info = remote_files(spec)
    except Exception as e:
        if _is_network_error(e):
            return plan_offline(spec, f"{endpoint()} cannot be reached ({type(e).__name__}: {_first_line(e)})")
        raise _hub_error(e, spec) from None

    def read_json(path: str) -> dict:
        local = _download(spec, path, commit)
        with open(local, encoding="utf-8") as f:
            return json.load(f)

    kind, names, weights = _choose(spec, files, read_json, f"the Hugging Face repo {spec.repo_id} has")
    return Plan(spec, kind, names, weights, files, commit, online=True, gated=bool(getattr(info, "gated", False)))


def _download(spec: RepoSpec, path: str, commit: Optional[str]) -> str:
    try:
        return _hf().hf_hub_download(spec.repo_id, path, revision=commit or spec.revision,
                                     cache_dir=hf_cache_dir(), endpoint=endpoint())
    except Exception as e:
        raise _hub_error(e, spec, path) from None


def _write_ref(spec: RepoSpec, commit: str) -> None:
    """refs/<revision> -> commit, as huggingface_hub records a revision it resolved."""
    rev = spec.revision or "main"
    if _COMMIT.fullmatch(rev):
        return
    ref = os.path.join(_repo_folder(hf_cache_dir(), spec.repo_id), "refs", *rev.split("/"))
    try:
        with open(ref, encoding="utf-8") as f:
            if f.read().strip() == commit:
                return
    except OSError:
        pass
    os.makedirs(os.path.dirname(ref), exist_ok=True)
    tmp = f"{ref}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(commit)
    os.replace(tmp, ref)


def fetch(p: Plan) -> Dict[str, str]:
    """Repo path -> local path of every file of the plan, downloading what is missing (after checking
    the disk has room for all of it)."""
    if not p.online:
        return {name: p.repo_files[name].local for name in p.files}
    if p.gated and not _token():
        if p.to_download:
            raise _gated(p.spec.repo_id)
        # all of it is here, and without a token the hub would refuse even to confirm that
        return fetch(plan_offline(p.spec, f"no HF_TOKEN for the gated repo {p.spec.repo_id}"))
    need = p.download_bytes
    if need:
        cache = hf_cache_dir()
        free = free_bytes(cache)
        if need > free:
            raise AkunuError(f"fetching {p.spec} needs {_gib(need)} but {cache} has {_gib(free)} free: free some "
                             f"space, or set HF_HUB_CACHE (or HF_HOME) to a larger disk")
    out = {}
    for name in p.files:
        f = p.repo_files[name]
        out[name] = f.local if f.where == "llama.cpp" else _download(p.spec, name, p.commit)
    if p.commit and any(p.repo_files[n].where != "llama.cpp" for n in p.files):
        _write_ref(p.spec, p.commit)
    return out


def pull(spec: RepoSpec) -> Tuple[Plan, Dict[str, str]]:
    p = plan(spec)
    return p, fetch(p)


def resolve(spec: RepoSpec) -> str:
    """The local path akunu loads for `spec`: a GGUF file, a joined split set, or a snapshot directory."""
    p, paths = pull(spec)
    if p.kind == "gguf":
        files = [paths[w] for w in p.weights]
        return files[0] if len(files) == 1 else join_gguf_splits(files, str(spec))
    return os.path.dirname(paths["config.json"])


def describe(spec: RepoSpec) -> dict:
    """What the caches hold of the repo, what the repo holds, and what `spec` loads (akunu-inspect)."""
    out: dict = {"repo": spec.repo_id, "name": str(spec), "revision": spec.revision or "main",
                 "endpoint": endpoint(), "hf_cache": hf_cache_dir(), "offline": offline()}
    folder = _repo_folder(hf_cache_dir(), spec.repo_id)
    refs = {}
    for dirpath, _, names in os.walk(os.path.join(folder, "refs")):
        for n in names:
            try:
                with open(os.path.join(dirpath, n), encoding="utf-8") as f:
                    refs[os.path.relpath(os.path.join(dirpath, n), os.path.join(folder, "refs"))] = f.read().strip()
            except (OSError, UnicodeDecodeError):
                pass
    snaps = {}
    try:
        commits = sorted(os.listdir(os.path.join(folder, "snapshots")))
    except OSError:
        commits = []
    for c in commits:
        files = _walk(os.path.join(folder, "snapshots", c))
        snaps[c] = {k: os.path.getsize(v) for k, v in sorted(files.items())}
    out["cached"] = {"folder": folder if os.path.isdir(folder) else None, "refs": refs, "snapshots": snaps,
                     "llama_cpp": dict(sorted(_llama_cpp_files(spec.repo_id).items()))}
    files: Dict[str, RepoFile] = {}
    if not offline():
        try:
            out["commit"], files, info = remote_files(spec)
            out["gated"] = bool(getattr(info, "gated", False))
            out["repo_files"] = {k: {"size": f.size, "cached": f.where} for k, f in sorted(files.items())}
        except Exception as e:
            if not _is_network_error(e):
                raise _hub_error(e, spec) from None
            out["repo_error"] = f"{endpoint()} cannot be reached ({type(e).__name__}: {_first_line(e)})"
    try:
        reason = "HF_HUB_OFFLINE=1" if out["offline"] else out.get("repo_error", "")
        p = plan_offline(spec, reason) if "repo_files" not in out else None
        if p is None:
            kind, names, weights = _choose(spec, files, lambda path: _cached_json(spec, path, files),
                                           f"the Hugging Face repo {spec.repo_id} has")
        else:
            kind, names, weights, files = p.kind, p.files, p.weights, p.repo_files
        out["loads"] = {"kind": kind, "files": {n: {"size": files[n].size, "cached": files[n].where} for n in names},
                        "weights": weights, "quant": quant_of(weights[0]) if kind == "gguf" else None,
                        "size": sum(files[n].size or 0 for n in names),
                        "cached": all(files[n].where for n in names)}
    except AkunuError as e:
        out["loads"] = {"error": str(e)}
    listing = files or cached_files(spec.repo_id, spec.revision)[1]
    out["gguf_models"] = [{"quant": m.quant, "files": m.files, "splits": m.count,
                           "size": sum(listing[f].size or 0 for f in m.files),
                           "cached": m.complete and all(listing[f].where for f in m.files)}
                          for m in gguf_models(listing)]
    return out


def _cached_json(spec: RepoSpec, path: str, files: Dict[str, RepoFile]) -> dict:
    """A small JSON file of the repo for akunu-inspect: from the cache, else fetched."""
    f = files.get(path)
    local = f.local if f is not None and f.where == "hf" and f.local else _download(spec, path, None)
    with open(local, encoding="utf-8") as fh:
        return json.load(fh)
