"""Nsight Compute's --csv output, as the bench scripts record it: ncu's own
lines first, then one row per (launch, metric)."""

import csv


def rows(path):
    """The table's rows, or None when the file holds no table."""
    lines = open(path).read().splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    return None if start is None else list(csv.DictReader(lines[start:]))


def value(row):
    return float(row["Metric Value"].replace(",", ""))


def launch_times(path):
    """Per kernel name (without its signature), the gpu__time_duration of
    each of its launches in ns; None when the file holds no table."""
    table = rows(path)
    if table is None:
        return None
    times = {}
    for row in table:
        if row.get("Metric Name") == "gpu__time_duration.sum":
            times.setdefault(row["Kernel Name"].split("(")[0], []).append(
                value(row))
    return times
