"""A small nightly retraining run: fit a linear model to /data/train.csv with plain Python.

Reads:  /data/train.csv (columns x1, x2, y)
Writes: /output/model.json (the weights) and /output/metrics.json (loss before and after)
"""

import csv
import json
import os
import random
import sys
import time

EPOCHS = int(os.environ.get("EPOCHS", "200"))
RATE = float(os.environ.get("LEARNING_RATE", "0.05"))


def load(path):
    with open(path, newline="") as handle:
        return [(float(r["x1"]), float(r["x2"]), float(r["y"])) for r in csv.DictReader(handle)]


def mse(rows, w1, w2, b):
    return sum((w1 * x1 + w2 * x2 + b - y) ** 2 for x1, x2, y in rows) / len(rows)


def main():
    started = time.time()
    rows = load("/data/train.csv")
    random.seed(31)
    w1 = w2 = b = 0.0
    initial = mse(rows, w1, w2, b)
    print(f"loaded {len(rows)} rows; initial loss {initial:.4f}", flush=True)
    for epoch in range(1, EPOCHS + 1):
        g1 = g2 = gb = 0.0
        for x1, x2, y in rows:
            err = w1 * x1 + w2 * x2 + b - y
            g1, g2, gb = g1 + err * x1, g2 + err * x2, gb + err
        n = len(rows)
        w1, w2, b = w1 - RATE * 2 * g1 / n, w2 - RATE * 2 * g2 / n, b - RATE * 2 * gb / n
        if epoch % 50 == 0 or epoch == EPOCHS:
            print(f"epoch {epoch}: loss {mse(rows, w1, w2, b):.6f}", flush=True)
    final = mse(rows, w1, w2, b)
    with open("/output/model.json", "w") as out:
        json.dump({"w1": w1, "w2": w2, "b": b}, out, indent=2)
    with open("/output/metrics.json", "w") as out:
        json.dump({"rows": len(rows), "epochs": EPOCHS, "initial_loss": initial, "final_loss": final,
                   "seconds": round(time.time() - started, 3)}, out, indent=2)  # fmt: skip
    print(f"done: final loss {final:.6f}", flush=True)
    return 0 if final < initial else 1


if __name__ == "__main__":
    sys.exit(main())
