"""Sign-in resists guessing (issue 15, item 2): failed attempts are throttled per name and per
client address (growing delay, then a temporary lockout that refuses the right password too),
and logged without the password. The policy on a fake clock, then the launched app's /login."""
from __future__ import annotations

import asyncio
import logging

import pytest

from db.users import SignInThrottle
from ui.signin import CLIENT, throttled


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _throttle(clock: Clock, **kw) -> SignInThrottle:
    return SignInThrottle(free=3, base_delay=0.5, max_delay=8.0, lock_name_after=10, lock_addr_after=25,
                          window_s=900, lock_s=900, clock=clock, **kw)


def test_delay_grows_then_the_name_locks_and_unlocks() -> None:
    clock = Clock()
    th = _throttle(clock)
    delays = []
    for _ in range(10):
        a = th.begin("alice", "10.0.0.1")
        assert not a.locked
        delays.append(a.delay)
    assert delays == [0, 0, 0, 0.5, 1, 2, 4, 8, 8, 8]  # free, then doubling, capped
    a = th.begin("alice", "10.0.0.1")  # the 11th attempt: locked, whatever the password
    assert a.locked and "locked" in a.reason
    assert th.begin("alice", "10.0.0.2").locked  # the name is locked from every address
    assert not th.begin("bob", "10.0.0.3").locked  # other names are not
    clock.t += 901
    a = th.begin("alice", "10.0.0.1")
    assert not a.locked and a.delay == 0  # the lock and the window have passed
    th.success("alice", "10.0.0.1")
    assert th.failures("alice", "10.0.0.1") == (0, 0)


def test_one_address_spraying_many_names_is_locked() -> None:
    clock = Clock()
    th = _throttle(clock)
    for i in range(25):
        assert not th.begin(f"user{i}", "6.6.6.6").locked
    assert th.begin("someone-else", "6.6.6.6").locked
    assert not th.begin("someone-else", "7.7.7.7").locked  # another address is unaffected


def test_success_clears_the_name_but_not_the_address() -> None:
    clock = Clock()
    th = _throttle(clock)
    for _ in range(5):
        th.begin("alice", "1.1.1.1")
    th.begin("alice", "1.1.1.1")
    th.success("alice", "1.1.1.1")
    assert th.failures("alice", "1.1.1.1") == (0, 5)  # the successful attempt itself is forgiven


def test_parallel_guesses_count_before_they_are_answered() -> None:
    """300 guesses sent at once: each is counted when it starts, so only 10 reach the password."""
    clock = Clock()
    th = _throttle(clock)
    checked = []

    def check(name: str, password: str) -> bool:
        checked.append(password)
        return password == "right"

    slept: list[float] = []

    async def no_sleep(s: float) -> None:
        slept.append(s)

    auth = throttled(check, th, sleep=no_sleep)

    async def burst() -> list[bool]:
        return await asyncio.gather(*(auth("alice", f"guess{i}") for i in range(300)), auth("alice", "right"))

    results = asyncio.run(burst())
    assert not any(results)  # the right password, sent last, is refused: the name is locked
    assert len(checked) == 10
    assert max(slept) == 8.0


def test_failures_are_logged_without_the_password(caplog) -> None:
    th = _throttle(Clock())

    async def no_sleep(s: float) -> None:
        pass

    auth = throttled(lambda n, p: p == "wonderland", th, sleep=no_sleep)
    token = CLIENT.set("192.0.2.7")
    try:
        with caplog.at_level(logging.INFO, logger="ui.signin"):
            assert not asyncio.run(auth("alice", "hunter2-secret"))
            assert asyncio.run(auth("alice", "wonderland"))
    finally:
        CLIENT.reset(token)
    text = caplog.text
    assert "sign-in failed for 'alice' from 192.0.2.7" in text and "signed in: 'alice'" in text
    assert "hunter2" not in text and "wonderland" not in text


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    from _cir_fakes import N_QUERIES, fake_trained_methods, make_test_engine
    from test_app_live import _free_port

    from ui import build_demo, launch_kwargs
    from ui.settings import AppConfig
    from ui.signin import signin_kwargs

    root = tmp_path_factory.mktemp("signin")
    (root / "users.txt").write_text("alice:wonderland\nbob:builder\n")
    with fake_trained_methods():
        engine = make_test_engine()
    cfg = AppConfig(world_queries=N_QUERIES, host="127.0.0.1", port=_free_port(), db=str(root / "a.sqlite"),
                    annotators=str(root / "users.txt"))
    kw = launch_kwargs(cfg)
    assert callable(kw["auth"]) and kw["app_kwargs"]["middleware"]  # what app.py launches with
    # The same wiring with a fast throttle (milliseconds instead of seconds).
    kw.update(signin_kwargs(cfg.annotators, SignInThrottle(free=2, base_delay=0.01, max_delay=0.02,
                                                           lock_name_after=6, lock_addr_after=100)))
    demo = build_demo(cfg, engine=engine)
    demo.launch(prevent_thread_lock=True, quiet=True, **kw)
    try:
        yield demo
    finally:
        demo.close()


def test_login_page_throttles_and_locks(app, caplog) -> None:
    import httpx

    login = app.local_url + "login"
    with caplog.at_level(logging.INFO, logger="ui.signin"):
        assert httpx.post(login, data={"username": "bob", "password": "builder"}).status_code == 200
        for i in range(6):
            r = httpx.post(login, data={"username": "alice", "password": f"wrong-{i}"})
            assert r.status_code == 400
        # locked: the right password is refused, with the same answer as a wrong one
        r = httpx.post(login, data={"username": "alice", "password": "wonderland"})
        assert r.status_code == 400 and r.json() == {"detail": "Incorrect credentials."}
        # another annotator from the same address still signs in
        assert httpx.post(login, data={"username": "bob", "password": "builder"}).status_code == 200
    assert "sign-in refused for 'alice' from 127.0.0.1" in caplog.text
    assert "wonderland" not in caplog.text and "wrong-" not in caplog.text


def test_forwarded_for_is_ignored_unless_the_proxy_is_trusted(app, caplog) -> None:
    """Issue 27: uvicorn trusted X-Forwarded-For from 127.0.0.1, so a local client rotating it
    escaped the per-address limit and was logged under a forged address."""
    import httpx

    login = app.local_url + "login"
    with caplog.at_level(logging.INFO, logger="ui.signin"):
        for i in range(3):
            httpx.post(login, data={"username": f"nobody{i}", "password": "x"},
                       headers={"X-Forwarded-For": f"203.0.113.{i}"})
    assert "203.0.113." not in caplog.text
    counts = [int(m) for m in __import__("re").findall(r"(\d+) from the address", caplog.text)]
    assert counts == sorted(counts) and counts[-1] >= 3  # one address, counting up


def test_a_named_proxy_is_believed(tmp_path, caplog) -> None:
    import httpx
    from _cir_fakes import N_QUERIES, fake_trained_methods, make_test_engine
    from test_app_live import _free_port

    from ui import build_demo, launch_kwargs
    from ui.settings import AppConfig, from_args

    with pytest.raises(SystemExit, match="not an IP address"):
        from_args(["--trusted-proxies", "10.0.0.1,proxy.local"], env={})
    (tmp_path / "users.txt").write_text("alice:wonderland\n")
    with fake_trained_methods():
        engine = make_test_engine()
    cfg = AppConfig(world_queries=N_QUERIES, host="127.0.0.1", port=_free_port(), db=str(tmp_path / "a.sqlite"),
                    annotators=str(tmp_path / "users.txt"), trusted_proxies="127.0.0.1, ::1")
    demo = build_demo(cfg, engine=engine)
    demo.launch(prevent_thread_lock=True, quiet=True, **launch_kwargs(cfg))
    try:
        with caplog.at_level(logging.INFO, logger="ui.signin"):
            httpx.post(demo.local_url + "login", data={"username": "alice", "password": "no"},
                       headers={"X-Forwarded-For": "198.51.100.4"})
        assert "sign-in failed for 'alice' from 198.51.100.4" in caplog.text
    finally:
        demo.close()
        launch_kwargs(AppConfig())  # nobody trusted again, for the tests after this one
