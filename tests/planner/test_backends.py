"""Model planner backends on real code paths: a tiny random LLaVA built in the test, no downloads.

* messages: order, images, the OpenAI wire round trip (no model needed);
* the hf backend: real ``generate`` with and without the answer grammar, padded batches with one grammar
  per row, the H.1 in-context example, LoRA through peft, clear errors;
* the OpenAI backend against the real local server (a subprocess on a free loopback port serving the
  same tiny model): answers, constrained answers, retries on 503, 401/404, an unreachable server, and the
  API key never showing up in errors, reprs or logs.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from homiebot.planner.base import PlanRequest
from homiebot.planner.constrained import f1_violation
from homiebot.planner.messages import (
    MessageFormatError,
    build_messages,
    decode_data_url,
    encode_png_data_url,
    from_openai_messages,
    to_openai_messages,
)
from homiebot.planner.prompt import ICL_EXAMPLE_USER, parse_output
from homiebot.testing.plan_requests import GROUNDED, make_request

SECRET = "sk-test-0123456789abcdefSECRET"


def _request(seed: int = 0, history: int = 0, targets: tuple[str, ...] = GROUNDED, size: int = 64) -> PlanRequest:
    return make_request(seed, history, targets, size=size)


# ------------------------------------------------------------------------------ messages (no model)


def test_messages_follow_the_documented_order() -> None:
    request = _request(history=2)
    messages = build_messages(request, icl_example=True)
    roles = [m.role for m in messages]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user", "assistant", "user"]
    assert messages[0].text == request.system_prompt
    assert messages[1].text == ICL_EXAMPLE_USER
    assert all(not m.images for m in messages[:-1])  # earlier rounds are text only
    assert len(messages[-1].images) == 4 and messages[-1].text == request.instruction
    assert np.array_equal(messages[-1].images[2], request.images[2])  # back view stays third
    plain = build_messages(request, include_history=False)
    assert [m.role for m in plain] == ["system", "user"]


def test_openai_wire_round_trip_keeps_pixels_and_order() -> None:
    request = _request(history=1)
    wire = to_openai_messages(build_messages(request), image_detail="low")
    last = wire[-1]["content"]
    assert [p["type"] for p in last] == ["image_url"] * 4 + ["text"]
    assert last[0]["image_url"]["url"].startswith("data:image/png;base64,")
    back = from_openai_messages(wire)
    assert [m.role for m in back] == ["system", "user", "assistant", "user"]
    for original, decoded in zip(request.images, back[-1].images):
        assert np.array_equal(original, decoded)  # PNG is lossless
    assert back[-1].text == request.instruction


@pytest.mark.parametrize(
    "bad, match",
    [
        ("http://example.com/a.png", "only base64 data URLs"),
        ("data:image/png,notbase64", "not base64-encoded"),
        ("data:image/png;base64,@@@", "invalid base64"),
        ("data:image/png;base64,aGVsbG8=", "readable image"),
    ],
)
def test_bad_image_urls_are_refused_with_the_reason(bad: str, match: str) -> None:
    with pytest.raises(MessageFormatError, match=match):
        decode_data_url(bad)


def test_bad_views_and_wire_messages_are_refused() -> None:
    request = _request()
    request.images = list(request.images[:3])
    with pytest.raises(MessageFormatError, match="four views"):
        build_messages(request)
    request.images = [np.zeros((8, 8), np.uint8)] * 4
    with pytest.raises(MessageFormatError, match="front view must be an"):
        build_messages(request)
    with pytest.raises(MessageFormatError, match="role"):
        from_openai_messages([{"role": "tool", "content": "x"}])
    with pytest.raises(MessageFormatError, match=r"content\[0\].type"):
        from_openai_messages([{"role": "user", "content": [{"type": "audio"}]}])
    assert decode_data_url(encode_png_data_url(np.full((3, 5, 3), 7, np.uint8))).shape == (3, 5, 3)


# ------------------------------------------------------------------------------ tiny model fixtures


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch = pytest.importorskip("torch")
    from homiebot.planner.tiny_vlm import save_tiny_vlm

    # One CPU thread: a tiny model's matrices are too small to split, and on a loaded 2-core machine extra
    # threads spin against each other (measured: a 60x slowdown). Restored after this module.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield save_tiny_vlm(tmp_path_factory.mktemp("models") / "tiny-llava", "llava", seed=0)
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def engine(tiny_model: Path):
    from homiebot.planner.hf_backend import LocalModelConfig, VisionLanguageModel

    return VisionLanguageModel(LocalModelConfig(model=str(tiny_model)))


def _hf_planner(engine, tiny_model: Path, **options):
    from homiebot.planner.hf_backend import HFPlanner

    return HFPlanner(model=str(tiny_model), engine=engine, **options)


# ------------------------------------------------------------------------------ hf backend


@pytest.mark.models
def test_hf_planner_runs_generate_and_returns_text(engine, tiny_model: Path) -> None:
    planner = _hf_planner(engine, tiny_model, max_new_tokens=24)
    answer = planner.plan(_request())
    assert isinstance(answer, str) and answer
    generation = planner.last_generations[0]
    assert generation.prompt_tokens > 500  # system prompt + four images + instruction
    assert 1 <= generation.completion_tokens <= 24
    assert engine.model.dtype.is_floating_point and str(engine.model.dtype) == "torch.float32"  # CPU: fp32


@pytest.mark.models
def test_unconstrained_random_model_makes_format_errors(engine, tiny_model: Path) -> None:
    planner = _hf_planner(engine, tiny_model, max_new_tokens=48, do_sample=True)
    planner.reset("t", seed=1)
    answers = planner.plan_batch([_request(i) for i in range(6)])
    assert sum(f1_violation(a) is not None for a in answers) >= 5  # noise is not the EMMOE format


@pytest.mark.models
def test_constrained_answers_parse_and_name_only_listed_and_grounded_things(engine, tiny_model: Path) -> None:
    planner = _hf_planner(engine, tiny_model, max_new_tokens=96, constrained=True, do_sample=True, temperature=1.5)
    planner.reset("t", seed=7)
    requests = [_request(i, history=i % 3) for i in range(12)]
    answers = planner.plan_batch(requests)
    for answer in answers:
        assert f1_violation(answer) is None, answer
        parsed = parse_output(answer)
        assert parsed.subtask is not None
        for name in (parsed.subtask.target, parsed.subtask.place):
            assert name is None or name in GROUNDED
    assert all(g.finish_reason == "stop" for g in planner.last_generations)
    assert len({parse_output(a).subtask for a in answers}) > 1  # sampling explores, the grammar only bounds


@pytest.mark.models
def test_each_row_of_a_batch_gets_its_own_grounded_targets(engine, tiny_model: Path) -> None:
    planner = _hf_planner(engine, tiny_model, max_new_tokens=80, constrained=True, do_sample=True)
    planner.reset("t", seed=3)
    kitchen = ("fridge", "apple")
    bedroom = ("bed", "pillow", "wardrobe")
    requests = [_request(i, targets=kitchen if i % 2 else bedroom) for i in range(8)]
    for request, answer in zip(requests, planner.plan_batch(requests)):
        subtask = parse_output(answer).subtask
        assert subtask is not None
        for name in (subtask.target, subtask.place):
            assert name is None or name in request.grounded_targets


@pytest.mark.models
def test_a_batch_may_mix_constrained_and_free_rows(engine, tiny_model: Path) -> None:
    """The server batches whatever arrives together: grammar rows and free rows share one generate call."""
    planner = _hf_planner(engine, tiny_model, max_new_tokens=80)
    requests = [_request(i) for i in range(4)]
    conversations = [planner.messages_for(r) for r in requests]
    grammars = [planner.grammar_for(requests[0]), None, planner.grammar_for(requests[2]), None]
    generations = engine.generate(conversations, grammars=grammars, max_new_tokens=80, do_sample=True, seed=2)
    assert f1_violation(generations[0].text) is None and f1_violation(generations[2].text) is None
    assert f1_violation(generations[1].text) is not None and f1_violation(generations[3].text) is not None


@pytest.mark.models
def test_tight_token_budget_still_completes_the_answer(engine, tiny_model: Path) -> None:
    planner = _hf_planner(engine, tiny_model, max_new_tokens=70, constrained=True, do_sample=True, temperature=2.0)
    planner.reset("t", seed=11)
    for answer in planner.plan_batch([_request(i) for i in range(4)]):
        assert f1_violation(answer) is None, answer
    assert all(g.completion_tokens <= 70 for g in planner.last_generations)


@pytest.mark.models
def test_batched_greedy_answers_match_single_answers(engine, tiny_model: Path) -> None:
    planner = _hf_planner(engine, tiny_model, max_new_tokens=20)
    requests = [_request(0), _request(1, history=2), _request(2, history=1)]  # different lengths: padding
    batched = planner.plan_batch(requests)
    single = [planner.plan(r) for r in requests]
    assert batched == single


@pytest.mark.models
def test_icl_example_reaches_the_prompt(engine, tiny_model: Path) -> None:
    planner = _hf_planner(engine, tiny_model, icl_example=True)
    prompt, images = engine.render(planner.messages_for(_request()))
    assert "here is an example output, please strictly follow its format" in prompt
    assert "I will surely follow the given format" in prompt
    assert prompt.index("example output") < prompt.index("Task: put the apple")
    assert len(images) == 4


@pytest.mark.models
def test_lora_adapter_is_applied(engine, tiny_model: Path, tmp_path: Path) -> None:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForImageTextToText

    from homiebot.planner.hf_backend import HFPlanner

    base = AutoModelForImageTextToText.from_pretrained(tiny_model, local_files_only=True)
    lora = get_peft_model(base, LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
    lora.save_pretrained(tmp_path / "adapter")
    adapted = HFPlanner(model=str(tiny_model), adapter=str(tmp_path / "adapter"), max_new_tokens=8)
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    with torch.no_grad():
        plain = engine.model(input_ids=ids).logits
        merged = adapted.engine.model(input_ids=ids).logits
    assert not torch.allclose(plain, merged, atol=1e-4)  # the LoRA delta is in the weights
    assert "lora" not in " ".join(n for n, _ in adapted.engine.model.named_parameters())  # merged
    assert isinstance(adapted.plan(_request()), str)


@pytest.mark.models
def test_load_errors_are_clear(tiny_model: Path, tmp_path: Path) -> None:
    from homiebot.planner.hf_backend import HFPlanner, PlannerLoadError
    from homiebot.planner.registry import PlannerError, make_planner

    with pytest.raises(PlannerError, match="does not exist: the hf planner loads local folders only"):
        make_planner("hf", model=str(tmp_path / "nowhere"))
    with pytest.raises(PlannerLoadError, match="adapter_config.json"):
        HFPlanner(model=str(tiny_model), adapter=str(tmp_path))
    with pytest.raises(PlannerError, match="does not take option"):
        make_planner("hf", model=str(tiny_model), base_url="http://x")
    import importlib.util

    if importlib.util.find_spec("bitsandbytes") is None:
        with pytest.raises(PlannerLoadError, match="needs bitsandbytes, which is not installed"):
            HFPlanner(model=str(tiny_model), quantization="4bit")
    # FP8 needs torchao and an FP8-capable GPU: each missing piece is named (CI has neither).
    import torch

    if importlib.util.find_spec("torchao") is None:
        with pytest.raises(PlannerLoadError, match=r"quantization='fp8' needs torchao, which is not installed"):
            HFPlanner(model=str(tiny_model), quantization="fp8")
    elif not torch.cuda.is_available():
        with pytest.raises(PlannerLoadError, match=r"quantization='fp8' needs a CUDA GPU with FP8 tensor cores"):
            HFPlanner(model=str(tiny_model), quantization="fp8")
    with pytest.raises(PlannerError, match="quantization"):
        make_planner("hf", model=str(tiny_model), quantization="fp4")
    (tmp_path / "adapter_config.json").write_text("{}")
    with pytest.raises(PlannerError, match=r"quantization='fp8' quantises merged weights: it needs merge_adapter=true"):
        make_planner("hf", model=str(tiny_model), adapter=str(tmp_path), merge_adapter=False, quantization="fp8")


# ------------------------------------------------------------------------------ OpenAI backend + local server


def _start_server(model: Path, tmp: Path, *extra: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str, Path]:
    port_file = tmp / f"port-{time.monotonic_ns()}"
    log_path = tmp / f"server-{time.monotonic_ns()}.log"
    log_file = open(log_path, "w")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(
        [sys.executable, "-m", "homiebot.planner.openai_server", "--model", str(model), "--port", "0",
         "--port-file", str(port_file), "--log-level", "DEBUG", "--torch-threads", "1", *extra],
        stdout=log_file,
        stderr=subprocess.STDOUT,
        env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})},
    )
    deadline = time.monotonic() + 90
    while not port_file.exists():
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}: {log_path.read_text()[-2000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("server did not start within 90 s")
        time.sleep(0.05)
    return proc, f"http://127.0.0.1:{int(port_file.read_text())}/v1", log_path


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def server(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory):
    """The tiny model behind a real OpenAI-compatible server that wants a key and fails its first 2 requests."""
    tmp = tmp_path_factory.mktemp("server")
    proc, url, log_path = _start_server(
        tiny_model, tmp, "--api-key-env", "HOMIE_TEST_KEY", "--max-wait-ms", "300", "--fail-first", "2",
        env={"HOMIE_TEST_KEY": SECRET},
    )
    yield {"url": url, "log": log_path, "proc": proc}
    _stop(proc)


@pytest.fixture
def key_env(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("HOMIE_TEST_KEY", SECRET)
    return "HOMIE_TEST_KEY"


def _openai_planner(url: str, key_env: str | None = None, **options):
    from homiebot.planner.registry import make_planner

    return make_planner("openai", base_url=url, api_key_env=key_env, **options)


@pytest.mark.models
def test_retries_on_503_then_answers(server, key_env: str) -> None:
    """The server answers the first two chat requests with 503; the client's backoff rides them out.

    It must be the module's first chat request (it is, in file order); other tests retry past the
    injected failures if they come first, which would leave nothing to test here.
    """
    import httpx

    from homiebot.planner.hf_backend import PlannerBackendError

    health_url = server["url"].removesuffix("/v1") + "/health"
    assert httpx.get(health_url).json()["injected_failures_left"] == 2, "another test used the server first"
    failing_first = _openai_planner(server["url"], key_env, model="tiny-llava", max_retries=0, max_tokens=16)
    with pytest.raises(PlannerBackendError, match="HTTP 503"):
        failing_first.plan(_request())  # consumes injected failure 1 of 2
    planner = _openai_planner(server["url"], key_env, model="tiny-llava", max_retries=2, max_tokens=16)
    started = time.monotonic()
    assert isinstance(planner.plan(_request()), str)  # failure 2 of 2, then success
    assert time.monotonic() - started > 0.3  # it waited before retrying (openai's backoff starts near 0.5 s)
    health = httpx.get(health_url).json()
    assert health["status"] == "ok" and health["injected_failures_left"] == 0


@pytest.mark.models
def test_openai_answers_match_the_hf_backend(server, key_env: str, engine, tiny_model: Path) -> None:
    request = _request(4, history=1)
    remote = _openai_planner(server["url"], key_env, model="tiny-llava", max_tokens=24)
    local = _hf_planner(engine, tiny_model, max_new_tokens=24)
    assert remote.plan(request) == local.plan(request)  # same messages, same greedy decode
    assert remote.last_usage["prompt_tokens"] == local.last_generations[0].prompt_tokens


@pytest.mark.models
def test_openai_constrained_answers_have_no_f1(server, key_env: str) -> None:
    planner = _openai_planner(
        server["url"], key_env, model="tiny-llava", constrained=True, max_tokens=90, temperature=1.5, seed=5
    )
    answers = planner.plan_batch([_request(i, history=i % 2) for i in range(6)])
    for answer in answers:
        assert f1_violation(answer) is None, answer
        subtask = parse_output(answer).subtask
        assert subtask is not None and (subtask.target is None or subtask.target in GROUNDED)


@pytest.mark.models
def test_model_is_discovered_and_concurrent_requests_are_batched(server, key_env: str) -> None:
    import httpx

    planner = _openai_planner(server["url"], key_env, max_tokens=8, concurrency=4)
    assert planner.model is None
    answers = planner.plan_batch([_request(i) for i in range(4)])
    assert planner.model == "tiny-llava" and len(answers) == 4
    stats = httpx.get(server["url"].removesuffix("/v1") + "/health").json()
    assert stats["max_batch_size_seen"] >= 2  # the 300 ms window gathered concurrent requests


@pytest.mark.models
def test_wrong_model_and_wrong_key_are_reported_without_the_key(server, key_env: str, monkeypatch, caplog) -> None:
    from homiebot.planner.hf_backend import PlannerBackendError

    with pytest.raises(PlannerBackendError, match=r"HTTP 404.*'no-such-model' does not exist"):
        _openai_planner(server["url"], key_env, model="no-such-model", max_tokens=8).plan(_request())
    monkeypatch.setenv("HOMIE_WRONG_KEY", SECRET + "-wrong")
    caplog.set_level(logging.DEBUG)
    planner = _openai_planner(server["url"], "HOMIE_WRONG_KEY", model="tiny-llava", max_tokens=8)
    with pytest.raises(PlannerBackendError, match=r"HTTP 401.*check the key in \$HOMIE_WRONG_KEY") as info:
        planner.plan(_request())
    for text in (str(info.value), repr(planner), caplog.text, server["log"].read_text()):
        assert SECRET not in text


@pytest.mark.models
def test_unreachable_server_names_the_url_not_the_key(key_env: str, caplog) -> None:
    import socket

    from homiebot.planner.hf_backend import PlannerBackendError

    with socket.socket() as sock:  # a port nobody listens on: bind, read it, close
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    caplog.set_level(logging.DEBUG)
    planner = _openai_planner(url, key_env, model="m", max_retries=1, timeout_s=5)
    with pytest.raises(PlannerBackendError) as info:
        planner.plan(_request())
    message = str(info.value)
    assert f"cannot reach the OpenAI-compatible server at {url} (2 attempt(s))" in message
    assert "Is it running" in message
    assert info.value.__cause__ is None and info.value.__suppress_context__  # no request object chained
    assert SECRET not in message and SECRET not in caplog.text and SECRET not in repr(planner)


def test_named_key_variable_must_be_set(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("openai")
    from homiebot.planner.registry import PlannerError, make_planner

    monkeypatch.delenv("HOMIE_UNSET_KEY", raising=False)
    with pytest.raises(PlannerError, match="--api-key-env HOMIE_UNSET_KEY: that environment variable is not set"):
        make_planner("openai", base_url="http://127.0.0.1:9/v1", api_key_env="HOMIE_UNSET_KEY")


def test_redaction_removes_keys_and_masked_echoes() -> None:
    from homiebot.planner.openai_backend import redact

    text = f"Incorrect API key provided: sk-abc***************wxyz. Key was {SECRET}."
    cleaned = redact(text, SECRET)
    assert SECRET not in cleaned and "sk-abc" not in cleaned and cleaned.count("[redacted]") == 2


@pytest.mark.models
def test_server_refuses_what_it_cannot_honour(server) -> None:
    import httpx

    headers = {"Authorization": f"Bearer {SECRET}"}
    url = server["url"] + "/chat/completions"
    base = {"model": "tiny-llava", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    # Run alone (or first), the module's server still has its injected 503s: use them up, so the cases below
    # meet the request checks and not the failure injection (test_retries_on_503_then_answers tests those).
    health_url = server["url"].removesuffix("/v1") + "/health"
    for _ in range(httpx.get(health_url).json()["injected_failures_left"]):
        assert httpx.post(url, json=base, headers=headers, timeout=30).status_code == 503
    cases = [
        ({**base, "stream": True}, 400, "streaming"),
        ({**base, "n": 2}, 400, "n=1"),
        ({**base, "structured_outputs": {"json": {"type": "object"}}}, 400, "grammar' only"),
        ({**base, "guided_grammar": "root ::= ("}, 400, "does not compile"),
        ({**base, "messages": []}, 400, "non-empty"),
        ({**base, "max_tokens": 0}, 400, "max_tokens"),
    ]
    for body, status, fragment in cases:
        response = httpx.post(url, json=body, headers=headers, timeout=30)
        assert response.status_code == status, body
        assert fragment in response.json()["error"]["message"]
    assert httpx.post(url, content=b"{not json", headers=headers, timeout=30).status_code == 400
    assert httpx.get(server["url"] + "/models").status_code == 401  # the key guards the API
    listed = httpx.get(server["url"] + "/models", headers=headers).json()
    assert [m["id"] for m in listed["data"]] == ["tiny-llava"]
