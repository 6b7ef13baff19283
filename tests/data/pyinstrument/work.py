"""A small program with a known call tree, profiled by pyinstrument for perflow's reader tests."""

import time


def busy(seconds):
    end = time.perf_counter() + seconds
    x = 0
    while time.perf_counter() < end:
        x += 1
    return x


def parse():
    return busy(0.1)


def solve():
    for _ in range(3):
        step()


def step():
    busy(0.05)
    time.sleep(0.05)


def main():
    parse()
    solve()


if __name__ == "__main__":
    main()
