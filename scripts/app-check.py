"""The application-file check of scripts/app-check: make the file, write to it live, and
compare `corescan query` with SQLite 3.54 (apsw) on it.

    app-check.py make DB             write the file (apsw, WAL, indexes, ANALYZE)
    app-check.py write DB SECONDS    a live writer: small transactions until SECONDS pass
    app-check.py compare DB BIN [live]
"""
import csv
import io
import random
import subprocess
import sys
import time

import apsw

QUERIES = [
    "SELECT * FROM users WHERE email = 'u4242@example.com'",
    "SELECT id, name FROM users WHERE name = 'alice5' LIMIT 5",
    "SELECT id FROM users WHERE name LIKE 'bo%' LIMIT 7 OFFSET 3",
    "SELECT * FROM users WHERE team = 7 LIMIT 20",
    "SELECT id, team FROM users ORDER BY team DESC LIMIT 15",
    "SELECT count(*) FROM users WHERE deleted_at IS NULL AND created_at > '2024-06-01'",
    "SELECT id, created_at FROM users WHERE deleted_at IS NULL AND created_at BETWEEN '2024-03-01' AND '2024-03-05' LIMIT 30",
    "SELECT * FROM orders WHERE user_id = 777",
    "SELECT id, total FROM orders WHERE user_id IN (5, 99, 12345, 59999) ORDER BY placed_at DESC",
    "SELECT status, count(*) FROM orders GROUP BY status",
    "SELECT id, status FROM orders WHERE status = 'paid' LIMIT 10 OFFSET 20000",
    "SELECT id, total FROM orders ORDER BY total DESC LIMIT 12",
    "SELECT id, total FROM orders WHERE total > 499 ORDER BY total",
    "SELECT count(*) FROM orders WHERE status = 'refunded'",
    "SELECT max(total), min(total) FROM orders",
    "SELECT * FROM orders WHERE id IN (1, 3, 20, 150000, 199999)",
    "SELECT * FROM orders WHERE id BETWEEN 1000 AND 1040",
    "SELECT user_id, count(*), sum(total) FROM orders WHERE user_id < 300 GROUP BY user_id",
    "SELECT DISTINCT status FROM orders",
    "SELECT DISTINCT status IS NULL, length(note) > 100 FROM orders WHERE user_id < 50",
    "SELECT id FROM orders WHERE status = 'pending' OR user_id = 42 LIMIT 25",
    "SELECT id FROM orders WHERE status IS NULL LIMIT 9",
    "SELECT * FROM orders WHERE user_id = 4242 ORDER BY placed_at DESC LIMIT 3",
    "SELECT name, count(*) FROM users GROUP BY name ORDER BY 2 DESC, 1 LIMIT 10",
    "SELECT id, email FROM users WHERE id > 59000 LIMIT 5",
    "SELECT typeof(total), count(*) FROM orders GROUP BY 1",
    "SELECT id FROM users WHERE team IS NULL ORDER BY id DESC LIMIT 4",
]


def make(path):
    rng = random.Random(7)
    db = apsw.Connection(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(
        """CREATE TABLE users(id INTEGER PRIMARY KEY, email TEXT UNIQUE, name TEXT COLLATE NOCASE,
             team INTEGER, created_at TEXT, deleted_at TEXT);
           CREATE TABLE orders(id INTEGER PRIMARY KEY, user_id INTEGER REFERENCES users(id),
             status TEXT, total NUMERIC, placed_at TEXT, note TEXT);
           CREATE INDEX orders_user ON orders(user_id, placed_at);
           CREATE INDEX orders_status ON orders(status);
           CREATE INDEX orders_total_desc ON orders(total DESC);
           CREATE INDEX users_team ON users(team DESC);
           CREATE INDEX users_name ON users(name);
           CREATE INDEX users_live ON users(created_at) WHERE deleted_at IS NULL;"""
    )
    names = ["alice", "Bob", "carol", "DAVE", "eve", "Frank", "grace", "heidi"]
    with db:
        for i in range(1, 60001):
            db.execute(
                "INSERT INTO users VALUES (?,?,?,?,?,?)",
                (i, f"u{i}@example.com", rng.choice(names) + str(i % 97),
                 rng.randrange(40) if i % 13 else None,
                 f"2024-{1 + i % 12:02d}-{1 + i % 28:02d}",
                 None if i % 5 else f"2025-01-{1 + i % 28:02d}"))
        statuses = ["paid", "pending", "refunded", "Paid", None]
        for i in range(1, 200001):
            total = rng.choice([round(rng.uniform(1, 500), 2), rng.randrange(1, 500), "12.50", None])
            db.execute(
                "INSERT INTO orders VALUES (?,?,?,?,?,?)",
                (i, rng.randrange(1, 60001), rng.choice(statuses), total,
                 f"2024-{1 + i % 12:02d}-{1 + i % 28:02d} {i % 24:02d}:00",
                 "x" * rng.randrange(0, 300)))
    db.execute("DELETE FROM orders WHERE id % 17 = 3")
    db.execute("DELETE FROM users WHERE id % 101 = 7")
    db.execute("ANALYZE")


def write(path, seconds):
    db = apsw.Connection(path)
    db.setbusytimeout(5000)
    end = time.time() + seconds
    n = 0
    while time.time() < end:
        with db:
            db.execute(
                "INSERT INTO orders(user_id, status, total, placed_at, note) VALUES (?,?,?,?,?)",
                (random.randrange(1, 60001), random.choice(["paid", "pending"]),
                 random.randrange(1, 500), "2025-02-01 10:00", "live"))
            db.execute("UPDATE users SET team = ? WHERE id = ?",
                       (random.randrange(40), random.randrange(1, 60001)))
            if n % 50 == 0:
                db.execute("DELETE FROM orders WHERE id = ?", (random.randrange(1, 200000),))
        n += 1
        time.sleep(0.002)


def compare(path, binary, live):
    # A real as SQLite 3.54 renders it as text (%!.17g), which `sqlite3 -csv` prints.
    text = apsw.Connection(":memory:")

    def render(v):
        if v is None:
            return ""
        if isinstance(v, float):
            return text.execute("SELECT CAST(? AS TEXT)", (v,)).fetchone()[0]
        if isinstance(v, bytes):
            return v.decode("utf-8", "replace")
        return str(v)

    ok = bad = err = 0
    for q in QUERIES:
        for backend in ["auto", "pread", "mmap", "dma"]:
            for cores in ["1", "2"]:
                db = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)
                # The writer holds the WAL's locks at moments: SQLite's readers wait too.
                db.setbusytimeout(5000)
                want = [[render(v) for v in row] for row in db.execute(q)]
                db.close()
                run = subprocess.run(
                    [binary, "query", path, q, "--format", "csv", "--io", backend, "--cores", cores],
                    capture_output=True, text=True, timeout=120)
                if run.returncode != 0:
                    err += 1
                    print("ERROR", backend, cores, q, run.stderr.strip()[:300])
                    continue
                # A one-column NULL is an empty line, which csv reads as no field.
                got = [r if r else [""] for r in csv.reader(io.StringIO(run.stdout))][1:]
                if live or got == want:
                    ok += 1
                else:
                    bad += 1
                    print("MISMATCH", backend, cores, q, "\n  sqlite  ", want[:4], "\n  corescan", got[:4])
    what = "without an error under a live writer" if live else "equal to SQLite 3.54's"
    print(f"app-check: {ok} of {len(QUERIES) * 8} runs {what}; {bad} mismatched, {err} failed")
    if bad or err:
        sys.exit(1)


if __name__ == "__main__":
    match sys.argv[1:]:
        case ["make", path]:
            make(path)
        case ["write", path, seconds]:
            write(path, float(seconds))
        case ["compare", path, binary]:
            compare(path, binary, False)
        case ["compare", path, binary, "live"]:
            compare(path, binary, True)
        case _:
            sys.exit(__doc__)
