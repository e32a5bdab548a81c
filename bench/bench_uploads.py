"""Hostile uploads at the same moment: what they cost the server's memory. Prints figures; asserts nothing.

  python bench/bench_uploads.py                      # 4 visitors, each a 47 MB zip claiming 65,535+ members
  python bench/bench_uploads.py --visitors 8 --mb 30

Each visitor is a session (bench/st_protocol.py, what a browser tab sends) on the Train page's "Save / load" tab. All
of them, at once, PUT their file to the upload URL and then rerun with the uploader's state listing it, as a browser
does. The server takes what its upload budget holds (ATTN_MAX_UPLOADS_TOTAL_MB) and refuses the rest before reading
their bodies; the page refuses each zip from its end record. The server's RSS (process and children) is sampled every
20 ms: printed are the RSS before, the peak, and the RSS 5 s and 25 s after, with the HTTP statuses and what the page
said to the first visitor.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import struct
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

import bench_browser as bb  # noqa: E402 - the same server start / stop
from st_protocol import Session  # noqa: E402
from streamlit.proto.Common_pb2 import FileURLs, FileUploaderState, UploadedFileInfo  # noqa: E402
from streamlit.proto.WidgetStates_pb2 import WidgetState  # noqa: E402

MB = 2**20


def rss(pid: int) -> int:
    p = psutil.Process(pid)
    return sum(x.memory_info().rss for x in [p] + p.children(recursive=True))


def hostile_zip(size: int) -> bytes:
    """`size` random bytes ending in a zip end record that claims a Zip64 directory (65,535 members or more)."""
    end = b"PK\x05\x06" + struct.pack("<HHHHIIH", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    return os.urandom(size - len(end)) + end


def put(url: str, session_id: str, file_id: str, data: bytes) -> int:
    """One upload PUT as the browser's uploader sends it (multipart, XSRF cookie + header): the HTTP status."""
    cookie = urllib.request.urlopen(url + "/_stcore/health").headers["Set-Cookie"].split(";")[0]
    boundary = uuid.uuid4().hex
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"x.zip\"\r\n"
            f"Content-Type: application/zip\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
    req = urllib.request.Request(f"{url}/_stcore/upload_file/{session_id}/{file_id}", data=body, method="PUT",
                                 headers={"Content-Type": f"multipart/form-data; boundary={boundary}",
                                          "Cookie": cookie, "X-Xsrftoken": cookie.split("=", 1)[1]})
    try:
        return urllib.request.urlopen(req, timeout=120).status
    except urllib.error.HTTPError as exc:
        return exc.code


async def visitor(url: str, s: Session, data: bytes) -> tuple[int, str]:
    """Upload through the Train page's uploader: (HTTP status, the page's last words after the rerun)."""
    file_id = str(uuid.uuid4())
    status = await asyncio.to_thread(put, url, s.session_id, file_id, data)
    wid = s.widget("train.upload").id
    where = f"/_stcore/upload_file/{s.session_id}/{file_id}"
    state = WidgetState(id=wid)
    state.file_uploader_state_value.CopyFrom(FileUploaderState(uploaded_file_info=[UploadedFileInfo(
        file_id=file_id, name="x.zip", size=len(data), file_urls=FileURLs(file_id=file_id, upload_url=where,
                                                                          delete_url=where))]))
    s._widgets[wid] = state
    await s.rerun()
    return status, s.text()[-160:].replace("\n", " | ")


async def main_async(url: str, pid: int, args) -> None:
    tabs = []
    for _ in range(args.visitors):
        s = Session(url, timeout=180)
        await s.connect()
        await s.open("train", "lang=en&tab=save")
        tabs.append(s)
    await asyncio.sleep(args.settle)
    base = rss(pid)
    peak, stop = [base], threading.Event()

    def sample() -> None:
        while not stop.wait(0.02):
            peak[0] = max(peak[0], rss(pid))
    threading.Thread(target=sample, daemon=True).start()
    data = hostile_zip(int(args.mb * MB))
    t0 = time.perf_counter()
    results = await asyncio.gather(*(visitor(url, s, data) for s in tabs))
    took = time.perf_counter() - t0
    await asyncio.sleep(5)
    after5 = rss(pid)
    await asyncio.sleep(20)
    after25 = rss(pid)
    stop.set()
    for s in tabs:
        await s.close()
    print(f"\n{time.strftime('%Y-%m-%d %H:%M')}, {args.visitors} visitors at once, each a {args.mb:g} MB zip "
          f"claiming 65,535+ members, on the Train page's uploader ({took:.1f} s)")
    print(f"HTTP statuses: {sorted(status for status, _ in results)}")
    print(f"the page said: ...{next((text for status, text in results if status == 204), '(no upload taken)')}")
    print(f"RSS before {base / MB:.0f} MB, peak {peak[0] / MB:.0f} MB (+{(peak[0] - base) / MB:.0f}), "
          f"5 s after {after5 / MB:.0f} MB (+{(after5 - base) / MB:.0f}), 25 s after {after25 / MB:.0f} MB "
          f"(+{(after25 - base) / MB:.0f})")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--visitors", type=int, default=4)
    p.add_argument("--mb", type=float, default=47.0, help="size of each hostile zip")
    p.add_argument("--settle", type=float, default=15.0, help="seconds to wait after the pages opened (warm-up)")
    args = p.parse_args(argv)
    with bb.Server() as server:
        bb.wait_healthy(server.url, 120)
        asyncio.run(main_async(server.url, server.proc.pid, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
