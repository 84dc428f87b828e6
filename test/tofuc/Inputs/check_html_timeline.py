"""Checks the predicted timeline of a `tofuc --dump-plan=html` page.

usage: check_html_timeline.py PAGE shared|dedicated

Every span lies in [0, 100]% of the step; a device's spans do not overlap;
shared (one host): all devices' spans together do not overlap and fill the
step; dedicated: the latest span ends the step. Prints one summary line.
"""
import re
import sys

page = open(sys.argv[1]).read()
mode = sys.argv[2]
step = re.search(r'id="predicted">step ([0-9.e+-]+) s', page)
assert step, "no predicted step"
rows = re.findall(r'<div class="timeline" data-device="(\d+)">(.*?)</div>', page)
assert rows, "no timeline rows"
spans = []
for device, body in rows:
    for kind, left, width in re.findall(
            r'<span class="(compute|copy|comm)" style="left:([0-9.]+)%;width:([0-9.]+)%"', body):
        spans.append((int(device), float(left), float(width)))
hidden = int(re.search(r"(\d+) spans under", page).group(1))
slack = 0.002  # the page rounds to 0.001%
for device in {d for d, _, _ in spans}:
    mine = sorted((l, w) for d, l, w in spans if d == device)
    for (l0, w0), (l1, _) in zip(mine, mine[1:]):
        assert l1 >= l0 + w0 - slack, ("overlap on device", device, l0, w0, l1)
for _, l, w in spans:
    assert l >= 0 and l + w <= 100 + slack, (l, w)
end = max(l + w for _, l, w in spans)
if mode == "shared":
    everything = sorted((l, w) for _, l, w in spans)
    for (l0, w0), (l1, _) in zip(everything, everything[1:]):
        assert l1 >= l0 + w0 - slack, ("devices overlap on one host", l0, w0, l1)
    if hidden == 0:
        total = sum(w for _, _, w in spans)
        assert abs(total - 100) < slack * len(spans) + 1e-9, total
print("timeline: %d devices, %d hidden spans, ends at %.1f%%" % (len(rows), hidden, end))
