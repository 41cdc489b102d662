"""Query parameters a route does not take are refused, as unknown body fields are: a misspelt filter
(``?stauts=pending``) would otherwise be ignored and the caller handed an unfiltered list as if it were the answer."""

from __future__ import annotations

from fastapi import Request
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError


def _names(dependant: Dependant) -> set[str]:
    names = {field.alias for field in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _names(sub)
    return names


async def known_query_only(request: Request) -> None:
    """A router dependency: a 422 naming the first unknown query parameter and the ones the route takes. Raised as a
    validation error, so a request without a valid key still gets its 401 first."""
    route = request.scope.get("route")
    dependant: Dependant | None = getattr(route, "dependant", None)
    if dependant is None:
        return
    known = _names(dependant)
    unknown = sorted(set(request.query_params) - known)
    if unknown:
        takes = ", ".join(sorted(known)) if known else "no query parameters"
        raise RequestValidationError(
            [
                {
                    "type": "extra_forbidden",
                    "loc": ("query", unknown[0]),
                    "msg": f"this route takes no such parameter: use {takes}",
                    "input": request.query_params[unknown[0]],
                }
            ]
        )
