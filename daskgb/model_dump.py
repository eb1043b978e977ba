"""A model's trees as text, as XGBoost dumps them: Booster.get_dump / dump_model (text, JSON and Graphviz dot)
and trees_to_dataframe.

The layout is XGBoost's (src/tree/tree_model.cc TextGenerator and JsonGenerator): nodes
depth first, left before right, numbers with float32's 9 significant digits; a split names
its feature from the feature map (a file of "index name type" lines), else the model's
feature names, else f<index>; a feature's type chooses the split's form ("q" / "float": x <
threshold; "int": the threshold rounded up; "i": an indicator; "c": the categories that go
right).
"""

from __future__ import annotations

import json
import os
import re

import numpy as np

_TYPES = ("i", "q", "int", "float", "c")


def _num(v) -> str:
    """A float32 as XGBoost's dump writes it (a C++ stream at max_digits10 = 9 digits, %g-style)."""
    v = float(np.float32(v))
    if np.isnan(v):
        return "nan"
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    return "%.9g" % v


def _escaped(name: str) -> str:
    """A feature name with JSON's escapes (XGBoost's EscapeU8), so that a dump stays readable
    and a JSON dump valid whatever the name holds."""
    return json.dumps(str(name), ensure_ascii=False)[1:-1]


def feature_map(booster, fmap="") -> tuple[list[str], list[str]]:
    """(names, types) for each feature: from the feature map file fmap where given (XGBoost's
    format: "<index> <name> <type>" a line, indices 0, 1, ...), else the model's own."""
    n = booster.n_features
    if fmap:
        names, types = [], []
        with open(os.path.expanduser(os.fspath(fmap)), encoding="utf-8") as f:
            for line in f:
                parts = line.split()
                if not parts:
                    continue
                if len(parts) != 3 or not parts[0].isdigit() or int(parts[0]) != len(names):
                    raise ValueError(f"feature map {fmap}: line {line.strip()!r} is not '<index> <name> <type>' with "
                                     f"index {len(names)}")
                if parts[2] not in _TYPES:
                    raise ValueError(f"feature map {fmap}: unknown feature type {parts[2]!r}; use one of {_TYPES}")
                names.append(parts[1])
                types.append(parts[2])
        if len(names) < n:  # XGBoost names the features beyond the map f<index>
            names += [f"f{i}" for i in range(len(names), n)]
            types += ["q"] * (n - len(types))
        return names, types
    names = list(booster.feature_names) if booster.feature_names else [f"f{i}" for i in range(n)]
    types = list(booster.feature_types) if booster.feature_types else ["q"] * n
    return names, types


def tabs(depth: int) -> str:
    return "\t" * depth


def _check_categorical(name, kind: str, nid: int) -> None:
    if kind != "c":
        raise ValueError(f"{name} in the feature map is numerical but tree node {nid} is categorical")


def _missing(tree, nid: int) -> int:
    return int(tree.left[nid] if tree.default_left[nid] else tree.right[nid])


def _text_split(tree, nid: int, depth: int, names, types) -> str:
    f = int(tree.feature[nid])
    name, kind = _escaped(names[f]), types[f]
    left, right, missing = int(tree.left[nid]), int(tree.right[nid]), _missing(tree, nid)
    indent = tabs(depth)
    if nid in tree.categories:
        _check_categorical(names[f], kind, nid)
        cats = ",".join(str(int(c)) for c in tree.categories[nid])
        return f"{indent}{nid}:[{name}:{{{cats}}}] yes={right},no={left},missing={missing}"
    if kind == "c":
        raise ValueError(f"{names[f]} in the feature map is categorical but tree node {nid} is numerical")
    if kind == "i":  # XGBoost's indicator line carries no indentation
        yes = right if tree.default_left[nid] else left
        return f"{nid}:[{name}] yes={yes},no={missing}"
    cond = str(int(np.ceil(np.float32(tree.threshold[nid])))) if kind == "int" else _num(tree.threshold[nid])
    return f"{indent}{nid}:[{name}<{cond}] yes={left},no={right},missing={missing}"


def _text_tree(tree, nid: int, depth: int, names, types, stats: bool) -> str:
    if tree.left[nid] < 0:
        cover = f",cover={_num(tree.cover[nid])}" if stats else ""
        return f"{tabs(depth)}{nid}:leaf={_num(tree.value[nid])}{cover}"
    stat = f",gain={_num(tree.gain[nid])},cover={_num(tree.cover[nid])}" if stats else ""
    return (_text_split(tree, nid, depth, names, types) + stat + "\n"
            + _text_tree(tree, int(tree.left[nid]), depth + 1, names, types, stats) + "\n"
            + _text_tree(tree, int(tree.right[nid]), depth + 1, names, types, stats))


def _json_split(tree, nid: int, depth: int, names, types) -> str:
    f = int(tree.feature[nid])
    name, kind = _escaped(names[f]), types[f]
    left, right, missing = int(tree.left[nid]), int(tree.right[nid]), _missing(tree, nid)
    head = f' "nodeid": {nid}, "depth": {depth}, "split": "{name}", '
    if nid in tree.categories:
        _check_categorical(names[f], kind, nid)
        cats = ", ".join(str(int(c)) for c in tree.categories[nid])
        return head + f'"split_condition": [{cats}], "yes": {right}, "no": {left}, "missing": {missing}'
    if kind == "c":
        raise ValueError(f"{names[f]} in the feature map is categorical but tree node {nid} is numerical")
    if kind == "i":
        yes = right if tree.default_left[nid] else left
        return f' "nodeid": {nid}, "depth": {depth}, "split": "{name}", "yes": {yes}, "no": {missing}'
    cond = str(int(np.ceil(np.float32(tree.threshold[nid])))) if kind == "int" else _num(tree.threshold[nid])
    return head + f'"split_condition": {cond}, "yes": {left}, "no": {right}, "missing": {missing}'


def _json_tree(tree, nid: int, depth: int, names, types, stats: bool) -> str:
    indent = "  " * (depth + 1)
    newline = "" if depth == 0 else "\n"
    if tree.left[nid] < 0:
        stat = f', "cover": {_num(tree.cover[nid])} ' if stats else ""
        node = f'{{ "nodeid": {nid}, "leaf": {_num(tree.value[nid])} {stat}}}'
    else:
        stat = f', "gain": {_num(tree.gain[nid])}, "cover": {_num(tree.cover[nid])}' if stats else ""
        node = (f"{{{_json_split(tree, nid, depth, names, types)} {stat}, \"children\": ["
                f"{_json_tree(tree, int(tree.left[nid]), depth + 1, names, types, stats)}, "
                f"{_json_tree(tree, int(tree.right[nid]), depth + 1, names, types, stats)}\n{indent}]}}")
    return newline + indent + node


_YES_COLOR, _DEFAULT_COLOR = "#FF0000", "#0000FF"  # XGBoost's GraphvizGenerator: red edges, blue where missing go


def _dot_node(tree, nid: int, names, types, stats: bool) -> str:
    """One node of a Graphviz dot dump and the edges to its children (XGBoost's layout)."""
    if tree.left[nid] < 0:
        cover = f"\ncover={_num(tree.cover[nid])}" if stats else ""
        return f'\n    {nid} [ label="leaf={_num(tree.value[nid])}{cover}" ]\n'
    f = int(tree.feature[nid])
    name, kind = _escaped(names[f]), types[f]
    left, right, missing = int(tree.left[nid]), int(tree.right[nid]), _missing(tree, nid)
    if nid in tree.categories:  # the listed categories go right: the right edge is "yes"
        _check_categorical(names[f], kind, nid)
        label = f"{name}:{{{','.join(str(int(c)) for c in tree.categories[nid])}}}"
        yes = right
    else:
        if kind == "c":
            raise ValueError(f"{names[f]} in the feature map is categorical but tree node {nid} is numerical")
        # The threshold as it is, for "int" features too (the text dump rounds it up; the dot dump does not).
        label = name if kind == "i" else f"{name}<{_num(tree.threshold[nid])}"
        yes = left
    stat = f"\ngain={_num(tree.gain[nid])}\ncover={_num(tree.cover[nid])}" if stats else ""
    edges = ""
    for child in (left, right):
        text = ("yes" if child == yes else "no") + (", missing" if child == missing else "")
        color = _DEFAULT_COLOR if child == missing else _YES_COLOR
        edges += f'    {nid} -> {child} [label="{text}" color="{color}"]\n'
    return f'\n    {nid} [ label="{label}{stat}" ]\n' + edges


def _dot_tree(tree, names, types, stats: bool) -> str:
    """A tree as Graphviz dot source (XGBoost's dump_format="dot"): nodes depth first, left first."""
    order, stack = [], [0]
    while stack:
        nid = stack.pop()
        order.append(nid)
        if tree.left[nid] >= 0:
            stack += [int(tree.right[nid]), int(tree.left[nid])]
    body = "".join(_dot_node(tree, nid, names, types, stats) for nid in order)
    return "digraph {\n    graph [ rankdir=TB ]\n" + body + "}"


def get_dump(booster, fmap="", with_stats: bool = False, dump_format: str = "text") -> list[str]:
    """Each tree as a string (XGBoost's Booster.get_dump): "text", "json" or "dot" (Graphviz)."""
    if dump_format not in ("text", "json", "dot"):
        raise ValueError(f"dump_format must be 'text', 'json' or 'dot', got {dump_format!r}")
    names, types = feature_map(booster, fmap)
    if dump_format == "text":
        return [_text_tree(t, 0, 0, names, types, bool(with_stats)) + "\n" for t in booster.trees]
    if dump_format == "dot":
        return [_dot_tree(t, names, types, bool(with_stats)) for t in booster.trees]
    return [_json_tree(t, 0, 0, names, types, bool(with_stats)) for t in booster.trees]


def split_value_histogram(booster, feature: str, fmap="", bins=None, as_pandas: bool = True):
    """A histogram of the thresholds the model's splits on `feature` (a name of the text dump)
    use, as XGBoost's Booster.get_split_value_histogram: read off the text dump, at most `bins`
    bins (default: one per distinct threshold), the empty bins dropped; a DataFrame of
    SplitValue (each bin's upper edge) and Count, or an (n, 2) array. A categorical feature's
    splits have no thresholds: an error."""
    pattern = re.compile(r"\[{0}<([\d.Ee+-]+)\]".format(feature))  # XGBoost's: the name as a regular expression
    values = [float(v) for tree in get_dump(booster, fmap) for v in pattern.findall(tree)]
    n_unique = len(np.unique(values))
    bins = max(min(n_unique, bins) if bins is not None else n_unique, 1)
    counts, edges = np.histogram(values, bins=bins)
    table = np.column_stack((edges[1:], counts))
    table = table[table[:, 1] > 0]
    if table.size == 0:
        names, types = feature_map(booster, fmap)
        if feature in names and types[names.index(feature)] == "c":
            raise ValueError("the split value histogram is of numerical splits; categorical splits have no values")
    if as_pandas:
        try:
            from pandas import DataFrame
        except ImportError:
            import warnings

            warnings.warn("Returning histogram as ndarray (as_pandas == True, but pandas is not installed).",
                          UserWarning, stacklevel=3)
            return table
        return DataFrame(table, columns=["SplitValue", "Count"])
    return table


def dump_model(booster, fout, fmap="", with_stats: bool = False, dump_format: str = "text") -> None:
    """Write get_dump's trees to a file (a path, or an open text file), as XGBoost's dump_model."""
    dumps = get_dump(booster, fmap, with_stats, dump_format)
    if dump_format == "json":
        text = "[\n" + ",\n".join(dumps) + "\n]"
    else:
        text = "".join(f"booster[{i}]:\n{d}" for i, d in enumerate(dumps))
    if isinstance(fout, (str, os.PathLike)):
        with open(os.path.expanduser(os.fspath(fout)), "w", encoding="utf-8") as f:
            f.write(text)
    else:
        fout.write(text)


def trees_to_dataframe(booster, fmap=""):
    """The trees as a pandas DataFrame, a row per node (XGBoost's Booster.trees_to_dataframe):
    Tree, Node, ID ("tree-node"), Feature ("Leaf" for a leaf), Split (the threshold; NaN for a
    leaf or a categorical split), Yes / No / Missing (the children's IDs), Gain (a leaf's
    value), Cover, Category (a categorical split's categories that go right, as strings).
    Read off the text dump with its stats, as XGBoost reads it, so the numbers are the dump's."""
    from pandas import DataFrame

    rows = {k: [] for k in ("Tree", "Node", "ID", "Feature", "Split", "Yes", "No", "Missing", "Gain", "Cover",
                            "Category")}
    nan = float("nan")
    for i, tree in enumerate(get_dump(booster, fmap, with_stats=True)):
        for line in tree.split("\n"):
            arr = line.split("[")
            if len(arr) == 1:
                if arr == [""]:
                    continue
                parse = arr[0].split(":")
                stats = re.split("=|,", parse[1])
                node = int(re.findall(r"\b\d+\b", parse[0])[0])
                values = ("Leaf", nan, nan, nan, nan, nan, float(stats[1]), float(stats[3]))
            else:
                fid = arr[1].split("]")
                if fid[0].find("<") != -1:
                    parse = fid[0].split("<")
                    split, category = float(parse[1]), None
                elif fid[0].find(":{") != -1:
                    parse = fid[0].split(":")
                    split, category = nan, parse[1][1:-1].split(",")
                else:
                    raise ValueError("trees_to_dataframe reads numerical and categorical splits; this model's "
                                     f"feature types make tree {i} hold another kind: {line.strip()!r}")
                stats = re.split("=|,", fid[1])
                node = int(re.findall(r"\b\d+\b", arr[0])[0])
                values = (parse[0], split, f"{i}-{stats[1]}", f"{i}-{stats[3]}", f"{i}-{stats[5]}", category,
                          float(stats[7]), float(stats[9]))
            feature, split, yes, no, missing, category, gain, cover = values
            for key, v in zip(rows, (i, node, f"{i}-{node}", feature, split, yes, no, missing, gain, cover,
                                     category)):
                rows[key].append(v)
    return DataFrame(rows).sort_values(["Tree", "Node"]).reset_index(drop=True)
