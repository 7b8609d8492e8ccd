#!/usr/bin/env python3
"""A TCP relay that adds a fixed one-way delay, for bench/pipeline.sh.

    bench/delay_relay.py --listen HOST PORT --target HOST PORT --delay-ms X [--ready FILE]

Every connection accepted on --listen gets its own connection to --target. Each direction
forwards every chunk it reads X ms after reading it, in order (a fixed latency, not a bandwidth
limit: chunks read during the delay go out in a burst when their time comes). When a side
closes, the other side's write half is closed after the queued chunks. --ready FILE: written
("PORT\\n") once listening. Runs until killed (SIGTERM / SIGINT).
"""
import argparse
import asyncio
import signal
import socket
import sys


def nodelay(writer):
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


async def pump(reader, writer, delay):
    loop = asyncio.get_running_loop()
    queue = asyncio.Queue()

    async def read_side():
        try:
            while True:
                data = await reader.read(1 << 20)
                await queue.put((loop.time() + delay, data))
                if not data:
                    return
        except (ConnectionError, OSError):
            await queue.put((loop.time(), b""))

    async def write_side():
        try:
            while True:
                due, data = await queue.get()
                wait = due - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                if not data:
                    if writer.can_write_eof():
                        writer.write_eof()
                    return
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            return

    await asyncio.gather(read_side(), write_side())


async def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--listen", nargs=2, metavar=("HOST", "PORT"), required=True)
    p.add_argument("--target", nargs=2, metavar=("HOST", "PORT"), required=True)
    p.add_argument("--delay-ms", type=float, required=True)
    p.add_argument("--ready", metavar="FILE")
    a = p.parse_args()
    if a.delay_ms < 0:
        sys.exit("delay_relay.py: --delay-ms must be >= 0")
    delay = a.delay_ms / 1000.0
    thost, tport = a.target[0], int(a.target[1])

    async def handle(creader, cwriter):
        try:
            treader, twriter = await asyncio.open_connection(thost, tport)
        except OSError as e:
            print(f"delay_relay.py: cannot reach {thost}:{tport}: {e}", file=sys.stderr)
            cwriter.close()
            return
        nodelay(cwriter)
        nodelay(twriter)
        try:
            await asyncio.gather(pump(creader, twriter, delay), pump(treader, cwriter, delay))
        finally:
            for w in (cwriter, twriter):
                w.close()

    server = await asyncio.start_server(handle, a.listen[0], int(a.listen[1]))
    port = server.sockets[0].getsockname()[1]
    if a.ready:
        with open(a.ready, "w") as f:
            f.write(f"{port}\n")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(main())
