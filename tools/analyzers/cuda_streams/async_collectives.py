"""Check ``async_collective_not_waited``.

- ``async_collective_not_waited`` (high): a ``torch.distributed`` collective with
  ``async_op=True`` whose work handle is dropped, or never ``.wait()``-ed before its tensor is
  read again. The current stream does not wait for the communication stream until
  ``work.wait()``."""
from __future__ import annotations

import ast

from grpo_debug.tools.analyzers.cuda_streams.base import AnalyzerBase
from grpo_debug.tools.analyzers.cuda_streams.report import SRC_PT_188655, Severity, StreamFinding
from grpo_debug.tools.analyzers.cuda_streams.scopes import (COLLECTIVES, P2P, Scope, is_true_const, keyword_arg,
                                                            position, ref_name, source_of, statement_of)


class AsyncCollectivesCheck(AnalyzerBase):
    """Mixin of the analyzer: see the module docstring."""

    # 6: async collectives never waited
    def _check_async_collectives(self, sc: Scope) -> None:
        for c in sc.calls:
            name = self._call_name(c) or ""
            short = name.rsplit(".", 1)[-1]
            is_dist = name.startswith("torch.distributed.")
            if not is_dist or short not in COLLECTIVES | P2P:
                continue
            if short in COLLECTIVES and not is_true_const(keyword_arg(c, "async_op")):
                continue
            tensor = c.args[0] if c.args else next(
                (k.value for k in c.keywords if k.arg in {"tensor", "output", "output_tensor", "tensor_list", "output_tensor_list"}),
                None,
            )
            tref = ref_name(tensor) if tensor is not None else None
            st = statement_of(c)
            parent = getattr(c, "_ss_parent", None)
            handle: str | None = None
            discarded_name = False
            if isinstance(st, ast.Assign) and len(st.targets) == 1 and ref_name(st.targets[0]) == "_" and st.value is c:
                discarded_name = True  # `_ = dist.all_reduce(..., async_op=True)`
            elif isinstance(st, ast.Assign) and len(st.targets) == 1 and (
                st.value is c or isinstance(st.value, (ast.ListComp, ast.List, ast.GeneratorExp))
            ):
                handle = ref_name(st.targets[0])  # work = ... / works = [... for t in ts]
                if st.value is not c:
                    tref = None  # the tensor is a comprehension variable
                if handle is None:
                    continue
            elif isinstance(parent, ast.Call) and isinstance(parent.func, ast.Attribute) and parent.func.attr == "append":
                handle = ref_name(parent.func.value)  # works.append(dist.all_reduce(..., async_op=True))
            elif not (isinstance(st, ast.Expr) and st.value is c) and not discarded_name:
                continue  # returned / passed on / stored elsewhere: the caller owns the handle
            handles = [handle] if handle else []
            for n in sc.calls:  # works.append(work) moves the handle into a container
                if handle and isinstance(n.func, ast.Attribute) and n.func.attr == "append" and any(ref_name(a) == handle for a in n.args):
                    r = ref_name(n.func.value)
                    if r:
                        handles.append(r)
            if any(self._handle_escapes(sc, h, c) for h in handles):
                continue
            waits = [w for w in sc.calls if position(w) > position(c) and any(self._is_wait_on(w, h) for h in handles)]
            first_wait = min(waits, key=position) if waits else None
            read = None
            if tref:
                for n, kind in sorted(self._reads(sc, tref), key=lambda nk: position(nk[0])):
                    if kind in {"use", "h2d"} and position(statement_of(n)) > position(st):
                        read = n
                        break
            if first_wait is not None and (read is None or position(first_wait) < position(read)):
                continue
            severity: Severity = "high" if read is not None else "medium"  # a read seen here, or not
            if handle is None:
                what = "its work handle is discarded, so nothing can wait on it"
            elif first_wait is None:
                what = f"its handle `{handle}` is never waited on in this function"
            else:
                what = f"`{handle}` is only waited on at line {first_wait.lineno}"
            read_txt = (
                f"; `{tref}` is read at line {read.lineno}" if read is not None
                else "; the tensor is not read again in this function"
            )
            self.findings.append(StreamFinding(
                check="async_collective_not_waited", severity=severity,
                line=c.lineno, end_line=read.lineno if read is not None else c.end_lineno,
                message=(
                    f"`{short}(..., async_op=True)` at line {c.lineno}: {what}{read_txt}. Until "
                    "`work.wait()` the current stream does not wait for the communication stream, so "
                    "reads can see a partial result. The tensor's lifetime is also only managed up to "
                    "the wait."
                ),
                fix=(
                    f"Keep the handle (`work = dist.{short}(..., async_op=True)`) and call `work.wait()` "
                    f"before `{tref or 'the tensor'}` is read, freed or reused. Or drop async_op=True."
                ),
                source=SRC_PT_188655,
            ))

    def _is_wait_on(self, w: ast.Call, handle: str) -> bool:
        f = w.func
        if isinstance(f, ast.Attribute) and f.attr == "wait":
            recv = source_of(f.value)
            if recv == handle or recv.startswith(handle + ".") or recv.startswith(handle + "["):
                return True
            if isinstance(f.value, ast.Name):  # `for w in works: w.wait()` / `[w.wait() for w in works]`
                p = getattr(f.value, "_ss_parent", None)
                while p is not None:
                    gens = p.generators if isinstance(p, (ast.ListComp, ast.GeneratorExp, ast.SetComp)) else [p] if isinstance(p, (ast.For, ast.AsyncFor)) else []
                    if any(ref_name(g.target) == f.value.id and source_of(g.iter) == handle for g in gens):
                        return True
                    p = getattr(p, "_ss_parent", None)
        name = self.al.resolve(f) or ""
        if name.endswith("wait_all") or name.endswith("futures.wait"):
            return any(source_of(a) == handle for a in w.args)
        return False

    def _handle_escapes(self, sc: Scope, handle: str, call: ast.Call) -> bool:
        """The handle leaves the function (returned, stored on an object, passed to a call)."""
        if "." in handle or handle in sc.params:
            return True  # `self.works`, `state.handles`, or a list the caller passed in
        for n in sc.nodes:
            if position(n) <= position(call):
                continue
            if isinstance(n, (ast.Return, ast.Yield)) and n.value is not None:
                if any(ref_name(x) == handle for x in ast.walk(n.value)):
                    return True
            if isinstance(n, ast.Call) and not (isinstance(n.func, ast.Attribute) and n.func.attr in {"wait", "append"}):
                if any(ref_name(a) == handle for a in n.args):
                    name = self.al.resolve(n.func) or ""
                    if not (name.endswith("wait_all") or name.endswith("futures.wait")):
                        return True
            if isinstance(n, ast.Assign) and ref_name(n.value) == handle:
                if any(ref_name(t) and ref_name(t).startswith(("self.", "cls.")) for t in n.targets):  # type: ignore[union-attr]
                    return True
        return False
