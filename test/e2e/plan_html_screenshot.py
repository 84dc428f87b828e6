#!/usr/bin/python3
"""e2e.plan_html_screenshot: the --dump-plan=html page really draws the tile grids.

1. ``tofuc mlp.onnx --gpus 4 --partitioner allrow-greedy --dump-plan=html`` writes the
   page; ``--dump-plan=json`` gives the tilings it should show.
2. Headless Chromium (Debian's ``chromium``) renders the page to a PNG.
3. The PNG is decoded (Pillow) and checked against the legend's device colours:
   - the largest weight, ``net.2.weight`` [128, 128] tiled ``dim0/4``, is the first
     drawing: some 150+ pixel columns must cross four stacked bands coloured
     device 0, 1, 2, 3 from top to bottom, of equal height (one quarter of the
     drawing each, +-3 px), and the bands must be as wide as the drawing is high
     (the tensor is square);
   - every device colour covers thousands of pixels (tiles, not just the legend
     swatch), in proportions within 1.3x of each other (allrow cuts every tensor
     into four near-equal parts).
It fails if the tiles are not drawn, drawn in the wrong colour or at the wrong
place. Exits 77 (ctest SKIP_RETURN_CODE: reported as skipped) only when no
chromium binary exists; scripts/setup.sh installs it, so CI runs it.
"""

import json
import os
import re
import shutil
import subprocess
import sys

import e2e_common as E

K = 4
WINDOW = (1200, 1500)
SKIP = 77


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def render(chromium, html_path, png_path, workdir):
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           "--force-color-profile=srgb", "--force-device-scale-factor=1",
           "--no-first-run", "--disable-extensions", "--allow-file-access-from-files",
           f"--user-data-dir={os.path.join(workdir, 'chromium-profile')}",
           f"--screenshot={png_path}", f"--window-size={WINDOW[0]},{WINDOW[1]}",
           "file://" + html_path]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    except subprocess.TimeoutExpired:
        E.fail(f"chromium did not finish in 90 s: {' '.join(cmd)}")
    E.check(os.path.isfile(png_path) and os.path.getsize(png_path) > 0,
            f"chromium wrote no screenshot (exit {res.returncode}):\n{' '.join(cmd)}\n"
            f"stderr: {res.stderr[-3000:]}")


def hex_rgb(color):
    return tuple(int(color[i:i + 2], 16) for i in (1, 3, 5))


def label_image(pixels, colors):
    """label[y, x] = device whose legend colour the pixel has (+-2 per channel), else -1."""
    import numpy as np
    label = np.full(pixels.shape[:2], -1, dtype=np.int32)
    for device, rgb in enumerate(colors):
        match = np.all(np.abs(pixels[:, :, :3].astype(np.int32) - np.array(rgb)) <= 2, axis=2)
        label[match] = device
    return label


def column_bands(column):
    """Runs of equal labels in one pixel column: [(label, start, length)]."""
    runs, start = [], 0
    for y in range(1, len(column) + 1):
        if y == len(column) or column[y] != column[start]:
            runs.append((int(column[start]), start, y - start))
            start = y
    return runs


def find_stacked_bands(label, k, min_len=30):
    """Columns where devices 0..k-1 appear as k stacked bands, top to bottom.

    Returns {x: [(device, start, length), ...]} for every such column. Gaps of up
    to 3 non-device pixels (tile borders) may separate the bands.
    """
    found = {}
    for x in range(label.shape[1]):
        runs = [r for r in column_bands(label[:, x]) if r[0] >= 0 or r[2] > 3]
        for i in range(len(runs) - k + 1):
            window = runs[i:i + k]
            if [r[0] for r in window] == list(range(k)) and all(r[2] >= min_len for r in window):
                # Consecutive: only short gaps between them.
                if all(window[j + 1][1] - (window[j][1] + window[j][2]) <= 3 for j in range(k - 1)):
                    found[x] = window
                    break
    return found


def main():
    env = E.parse_args(__doc__.splitlines()[1])
    chromium = find_chromium()
    if chromium is None:
        print("SKIP: no chromium binary on PATH (scripts/setup.sh installs Debian's chromium)")
        sys.exit(SKIP)
    env.require_tools(env.tofuc)
    try:
        import numpy as np
        from PIL import Image
    except ImportError as e:
        E.fail(f"{e}: the screenshot check needs numpy and Pillow (python3-pil, scripts/setup.sh)")

    html_path = env.path("plan.html")
    png_path = env.path("plan.png")
    # allrow-greedy: a known tiling (every tensor cut on its first dimension).
    flags = ["--gpus", K, "--partitioner", "allrow-greedy"]
    res = E.run_tool([env.tofuc, env.model, *flags, "--dump-plan=html"])
    with open(html_path, "w") as f:
        f.write(res.stdout)
    plan = json.loads(E.run_tool([env.tofuc, env.model, *flags, "--dump-plan=json"]).stdout)

    legend = re.findall(r'data-device="(\d+)" style="background:(#[0-9a-f]{6})"', res.stdout)
    E.check([int(d) for d, _ in legend] == list(range(K)),
            f"legend lists devices {[d for d, _ in legend]}, expected 0..{K - 1}")
    colors = [hex_rgb(c) for _, c in legend]
    E.check(len(set(colors)) == K, f"legend colours are not distinct: {legend}")

    # The known tiling the drawing must show.
    params = [t for t in plan["tensors"] if t["role"] == "param"]
    largest = max(params, key=lambda t: t["bytes"])
    E.check(largest["name"] == "net.2.weight" and largest["shape"] == [128, 128]
            and largest["tiling"] == [[0, K]],
            f"expected the largest weight to be net.2.weight [128, 128] tiled dim0/{K}, got {largest}")

    render(chromium, html_path, png_path, env.workdir)
    pixels = np.asarray(Image.open(png_path).convert("RGB"))
    E.check(pixels.shape[0] >= WINDOW[1] - 5 and pixels.shape[1] >= WINDOW[0] - 5,
            f"screenshot is {pixels.shape[1]}x{pixels.shape[0]}, expected about {WINDOW}")
    label = label_image(pixels, colors)

    counts = [int((label == d).sum()) for d in range(K)]
    print(f"device colour pixels: {counts}")
    E.check(min(counts) > 4000, f"device colours cover too few pixels {counts}: the tiles are not drawn")
    E.check(max(counts) <= 1.3 * min(counts),
            f"device colour areas {counts} are not near-equal, but every tensor is cut in {K} near-equal parts")

    bands = find_stacked_bands(label, K)
    E.check(bands, f"no pixel column crosses {K} stacked bands coloured device 0..{K - 1}: "
                   "the row-split tiles are not drawn")
    # The first (largest) drawing: the columns whose bands start highest.
    top = min(w[0][1] for w in bands.values())
    columns = sorted(x for x, w in bands.items() if w[0][1] == top)
    # Its columns: the first run of adjacent ones (the next drawing to the
    # right, net.0.weight, starts at the same height).
    run_end = 0
    while run_end + 1 < len(columns) and columns[run_end + 1] == columns[run_end] + 1:
        run_end += 1
    columns = columns[:run_end + 1]
    window = bands[columns[0]]
    lengths = [r[2] for r in window]
    height = window[-1][1] + window[-1][2] - window[0][1]
    width = columns[-1] - columns[0] + 1
    print(f"first drawing: {width} columns x {height} px, bands {lengths} at y={top}")
    E.check(width >= 150, f"the stacked bands span only {width} columns (x {columns[0]}..{columns[-1]})")
    E.check(max(lengths) - min(lengths) <= 3, f"band heights {lengths} are not equal (dim0/{K} of 128 rows)")
    E.check(all(abs(l - height / K) <= 3 for l in lengths),
            f"band heights {lengths} are not a quarter of the drawing's height {height}")
    E.check(abs(width - height) <= 4,
            f"net.2.weight is square but its drawing is {width} x {height} px")


if __name__ == "__main__":
    E.main_wrapper(main)
