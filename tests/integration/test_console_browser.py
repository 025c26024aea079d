"""The web console in a real browser: `epochlog console` as its own process over a live 3-broker
cluster, Debian's chromium (headless) driven by selenium through /usr/bin/chromedriver.

One cluster, one console and one browser for the module; each is stopped by its own pid at the
end. Records and groups are made with confluent-kafka, as an application would. The broker
kill comes last (it leaves the cluster under-replicated). Pages are server-rendered, so each
check loads a page and reads it; where the cluster needs a moment (a topic's metadata, the ISR
shrinking after a kill) the test reloads until the page shows it or a deadline passes, then
asserts on what the page says.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

from epochlog.client import Admin
from epochlog.processes import spawn
from epochlog.testing.cluster import LocalCluster
from epochlog.zk.launcher import free_port

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
# Set to a path to keep a screenshot of the overview after the broker kill (how
# docs/images/console-overview.png was made).
SCREENSHOT = os.environ.get("EPOCHLOG_CONSOLE_SCREENSHOT")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    local = LocalCluster(
        tmp_path_factory.mktemp("console"),
        3,
        broker_config={
            "group.initial.rebalance.delay.ms": 300,
            "offsets.topic.num.partitions": 3,
            "group.min.session.timeout.ms": 1000,
        },
    )
    local.start()
    try:
        yield local
    finally:
        local.close()


@pytest.fixture(scope="module")
def console_url(cluster: LocalCluster) -> Iterator[str]:
    port = free_port()
    process = spawn(
        [
            sys.executable,
            "-m",
            "epochlog",
            "console",
            "--bootstrap-server",
            cluster.bootstrap_servers,
            "--port",
            str(port),
            # brokers 1 and 2's Prometheus endpoints; broker 3's is left out on purpose
            *(f"--metrics-url={b}={cluster.metrics_endpoints()[b]}" for b in (1, 2)),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        announced = process.stdout.readline().decode() if process.stdout else ""
        assert f"console at {url}/" in announced, announced
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(flag)
    options.add_argument("--window-size=1400,1000")
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        # quit() ends chromedriver and the chromium it started (by their pids)
        driver.quit()


@pytest.fixture(scope="module")
def admin(cluster: LocalCluster) -> Iterator[Admin]:
    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as client:
        yield client


def load_until(
    browser: webdriver.Chrome, url: str, shows: Callable[[str], bool], within_s: float = 30.0
) -> str:
    """Load `url` until its text satisfies `shows` or the time is up; the page's last text."""
    deadline = time.monotonic() + within_s
    while True:
        browser.get(url)
        text = browser.find_element(By.TAG_NAME, "body").text
        if shows(text) or time.monotonic() > deadline:
            return text
        time.sleep(0.5)


def produce(cluster: LocalCluster, topic: str, values: list[bytes], timestamp_ms: int = 0) -> None:
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers})
    for value in values:
        producer.produce(topic, value=value, key=b"k", partition=0, timestamp=timestamp_ms)
    assert producer.flush(30) == 0


def test_overview_lists_the_three_brokers_with_epochs_and_the_controller(
    cluster: LocalCluster, console_url: str, browser: webdriver.Chrome
) -> None:
    controller = cluster.controller_id()
    text = load_until(browser, console_url + "/", lambda t: "Controller: broker" in t)
    assert f"Controller: broker {controller}" in text
    epochs = cluster.zk_state()["brokers"]
    for broker_id in (1, 2, 3):
        element = browser.find_element(By.ID, f"broker-{broker_id}")
        row = element.text
        cells = [cell.text for cell in element.find_elements(By.TAG_NAME, "td")]
        assert cells[0] == str(broker_id)
        assert cells[3] == str(epochs[broker_id])  # the broker epoch (KIP-380)
        assert cells[4] == ("controller" if broker_id == controller else "")
        if broker_id == 3:  # no endpoint given to this console
            assert "metrics unavailable" in row
        else:  # a value from the broker's own endpoint
            assert "active controller " + ("1" if broker_id == controller else "0") in row
    assert "0 under-replicated" in text and "0 offline" in text


def test_a_created_topic_appears_with_its_partitions(
    admin: Admin, console_url: str, browser: webdriver.Chrome
) -> None:
    admin.create_topic("console-topic", 3, 3)
    text = load_until(browser, console_url + "/topics", lambda t: "console-topic" in t)
    assert "console-topic" in text
    browser.find_element(By.LINK_TEXT, "console-topic").click()
    for partition in range(3):
        row = browser.find_element(By.ID, f"partition-{partition}").text
        leader, isr = row.split()[1], row[row.index("[", row.index("]")) :]
        assert leader in "123"
        assert isr.count(",") == 2  # three replicas in the ISR


def test_a_produced_json_message_is_shown_decoded_at_its_offset(
    cluster: LocalCluster, admin: Admin, console_url: str, browser: webdriver.Chrome
) -> None:
    admin.create_topic("console-json", 1, 3)
    minute_ago = int(time.time() * 1000) - 60_000
    produce(cluster, "console-json", [b"plain text", bytes([0, 1, 2, 255])], minute_ago)
    document = {"order": 42, "items": ["a", "b"]}
    produce(cluster, "console-json", [json.dumps(document).encode()], minute_ago + 30_000)
    page = console_url + "/topics/console-json/messages?partition=0&offset=0"
    load_until(browser, page, lambda t: "record" in t and "log end 3" in t)
    record = browser.find_element(By.ID, "record-2")
    value = record.find_elements(By.TAG_NAME, "pre")[1]
    assert value.get_attribute("class") == "json"
    assert json.loads(value.text) == document
    assert '"order": 42' in value.text  # pretty-printed, not the raw line
    assert (
        browser.find_element(By.ID, "record-0").find_elements(By.TAG_NAME, "pre")[1].text
        == "plain text"
    )
    binary = browser.find_element(By.ID, "record-1").find_elements(By.TAG_NAME, "pre")[1]
    assert (binary.get_attribute("class"), binary.text) == ("hex", "00 01 02 ff")
    # a page of one record from offset 1 links on to offset 2
    browser.get(console_url + "/topics/console-json/messages?partition=0&offset=1&limit=1")
    assert browser.find_elements(By.ID, "record-1") and not browser.find_elements(By.ID, "record-2")
    browser.find_element(By.PARTIAL_LINK_TEXT, "next").click()
    assert browser.find_elements(By.ID, "record-2")
    # by time: the first record at or after it
    browser.get(
        console_url + f"/topics/console-json/messages?partition=0&timestamp={minute_ago + 10_000}"
    )
    shown = browser.find_elements(By.CSS_SELECTOR, "#records tr[id^=record-]")
    assert [row.get_attribute("id") for row in shown] == ["record-2"]


def test_a_group_with_committed_offsets_shows_its_lag(
    cluster: LocalCluster, admin: Admin, console_url: str, browser: webdriver.Chrome
) -> None:
    admin.create_topic("console-lag", 1, 3)
    produce(cluster, "console-lag", [f"r{i}".encode() for i in range(10)])
    consumer = ck.Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "console-group",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign([ck.TopicPartition("console-lag", 0, 0)])
        read: list[Any] = []
        deadline = time.monotonic() + 30
        while len(read) < 4 and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                read.append(message)
        assert len(read) >= 4
        consumer.commit(offsets=[ck.TopicPartition("console-lag", 0, 4)], asynchronous=False)
    finally:
        consumer.close()
    text = load_until(browser, console_url + "/groups", lambda t: "console-group" in t)
    assert "console-group" in text
    browser.find_element(By.LINK_TEXT, "console-group").click()
    row = browser.find_element(By.ID, "lag-console-lag-0").text.split()
    assert row == ["console-lag", "0", "4", "10", "6"]
    assert browser.find_element(By.ID, "total-lag").text == "6"


def test_the_controller_events_page_shows_what_the_controller_handled(
    admin: Admin, console_url: str, browser: webdriver.Chrome
) -> None:
    admin.create_topic("console-events", 1, 3)
    text = load_until(
        browser, console_url + "/controller/events", lambda t: "'console-events'" in t
    )
    assert "Failover" in text  # the controller's first event
    assert "added ['console-events']" in text  # the TopicChange it caused, with its note


def under_replicated(browser: webdriver.Chrome) -> int:
    return int(browser.find_element(By.ID, "under-replicated-count").text.split()[0])


def test_killing_a_broker_shows_under_replicated_partitions_after_a_refresh(
    cluster: LocalCluster, admin: Admin, console_url: str, browser: webdriver.Chrome
) -> None:
    admin.create_topic("console-kill", 2, 3)
    load_until(browser, console_url + "/topics", lambda t: "console-kill" in t)
    controller = cluster.controller_id()
    victim = next(b for b in (1, 2, 3) if b != controller)
    cluster.kill_broker(victim)
    # The leader may shrink the ISR (replica.lag.time.max.ms) before the victim's ZooKeeper
    # session expires and it leaves DescribeCluster: wait for both.
    load_until(
        browser,
        console_url + "/",
        lambda _text: (
            under_replicated(browser) > 0
            and "console-kill" in _text
            and not browser.find_elements(By.ID, f"broker-{victim}")
        ),
        within_s=60,
    )
    assert under_replicated(browser) > 0
    unhealthy = browser.find_element(By.ID, "unhealthy-partitions").text
    assert "console-kill" in unhealthy and "under-replicated" in unhealthy
    assert not browser.find_elements(By.ID, f"broker-{victim}")  # gone from DescribeCluster
    if SCREENSHOT:
        browser.save_screenshot(SCREENSHOT)
