"""/v1/audio/transcriptions and /v1/audio/translations on akunu-serve: OpenAI's
multipart fields and response shapes, the openai client, and 4xx for bad requests."""

import json
import os

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("multipart")
from fastapi.testclient import TestClient  # noqa: E402

import akunu  # noqa: E402
from akunu.server.app import ServerLimits, create_app  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def whisper(whisper_tiny_en_dir):
    return akunu.load(whisper_tiny_en_dir)


@pytest.fixture(scope="module")
def client(whisper):
    llm = akunu.load(os.path.join(ROOT, "tests", "models", "llama-q8_0.gguf"))
    app = create_app({"tiny.en": whisper, "llm": llm}, limits=ServerLimits(max_audio_bytes=2 << 20))
    with TestClient(app) as c:
        yield c


def post(client, path, audio_path, **fields):
    with open(audio_path, "rb") as f:
        return client.post(path, files={"file": (os.path.basename(audio_path), f, "audio/wav")}, data=fields)


def test_transcription_formats(client, whisper, speech):
    path, _ = speech["fox"]
    want = whisper.transcribe(path)
    r = post(client, "/v1/audio/transcriptions", path, model="whisper-1")
    assert r.status_code == 200 and r.json() == {"text": want.text}
    r = post(client, "/v1/audio/transcriptions", path, model="tiny.en", response_format="text")
    assert r.text.strip() == want.text
    stamped = whisper.transcribe(path, timestamps=True)
    r = post(client, "/v1/audio/transcriptions", path, response_format="verbose_json", language="en")
    body = r.json()
    assert body["task"] == "transcribe" and body["language"] == "english" and body["text"] == stamped.text
    assert [(s["start"], s["end"]) for s in body["segments"]] == [(s.start, s.end) for s in stamped.segments]
    srt = post(client, "/v1/audio/transcriptions", path, response_format="srt").text
    assert srt.startswith("1\n00:00:00,000 --> ") and stamped.segments[0].text.strip() in srt
    vtt = post(client, "/v1/audio/transcriptions", path, response_format="vtt").text
    assert vtt.startswith("WEBVTT\n")


def test_streamed_transcription(client, whisper, speech):
    path, _ = speech["weather"]
    r = post(client, "/v1/audio/transcriptions", path, stream="true")
    events = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: ")]
    assert events[-1]["type"] == "transcript.text.done"
    assert events[-1]["text"] == whisper.transcribe(path).text
    assert "".join(e["delta"] for e in events[:-1]).strip() == events[-1]["text"]


def test_openai_client(client, whisper, speech):
    openai = pytest.importorskip("openai")
    path, _ = speech["kitchen"]
    c = openai.OpenAI(base_url=str(client.base_url) + "/v1", api_key="none", http_client=client)
    with open(path, "rb") as f:
        out = c.audio.transcriptions.create(model="whisper-1", file=f)
    assert out.text == whisper.transcribe(path).text


def error(r, status):
    assert r.status_code == status, r.text
    return r.json()["error"]["message"]


def test_bad_audio_requests(client, speech, tmp_path):
    path, _ = speech["fox"]
    assert "file" in error(client.post("/v1/audio/transcriptions", data={"model": "whisper-1"}), 400)
    assert "multipart" in error(client.post("/v1/audio/transcriptions", json={"file": "x"}), 400)
    junk = tmp_path / "junk.wav"
    junk.write_bytes(b"not audio" * 100)
    assert "cannot read" in error(post(client, "/v1/audio/transcriptions", str(junk)), 400)
    empty = tmp_path / "empty.wav"
    empty.write_bytes(b"")
    assert "empty" in error(post(client, "/v1/audio/transcriptions", str(empty)), 400)
    assert "response_format" in error(post(client, "/v1/audio/transcriptions", path, response_format="mp3"), 400)
    assert "temperature" in error(post(client, "/v1/audio/transcriptions", path, temperature="hot"), 400)
    assert "word" in error(post(client, "/v1/audio/transcriptions", path,
                                **{"timestamp_granularities[]": "word"}), 400)
    assert "English-only" in error(post(client, "/v1/audio/translations", path), 400)
    assert "not a speech-to-text" in error(post(client, "/v1/audio/transcriptions", path, model="llm"), 400)
    assert "does not exist" in error(post(client, "/v1/audio/transcriptions", path, model="nope"), 404)
    big = tmp_path / "big.wav"
    big.write_bytes(b"\0" * (3 << 20))
    assert "limit" in error(post(client, "/v1/audio/transcriptions", str(big)), 413)
    r = client.post("/v1/chat/completions", json={"model": "tiny.en", "messages": [{"role": "user", "content": "hi"}]})
    assert "speech-to-text" in error(r, 400)
    assert "speech-to-text" in error(client.post("/tokenize", json={"model": "tiny.en", "content": "hi"}), 400)
    models = client.get("/v1/models").json()["data"]
    assert {m["id"]: m["meta"]["architecture"] for m in models} == {"tiny.en": "whisper", "llm": "llama"}
