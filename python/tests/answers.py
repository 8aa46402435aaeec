"""What the tests compare with: the fixtures' expected.json (what numpy, pyarrow, xarray or
pylance computed when the fixtures were written), and one-row answers and plans from SQL."""

import json
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "tests" / "data"


def expected(kind):
    return json.loads((DATA / kind / "expected.json").read_text())


def one(ctx, sql):
    """The one row `sql` answers, as Python values."""
    table = ctx.sql(sql).to_arrow_table()
    assert table.num_rows == 1, sql
    return [table.column(i)[0].as_py() for i in range(table.num_columns)]


def plan(ctx, sql):
    """EXPLAIN's lines, joined."""
    rows = ctx.sql("EXPLAIN " + sql).to_arrow_table().to_pylist()
    return "\n".join(r["plan"] for r in rows)
