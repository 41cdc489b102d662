"""A pass counts as a training row only if its answer follows from its own work (against reward hacking).

A verifier checks the final answer only, so a lucky guess, a bare number or an answer copied from a hint also
pass. Training on those teaches guessing. Each environment may register a check of the process; where none is
registered, a verified pass is trusted.

Arithmetic: the answer must equal the last calculator result; every number in a calculator call must be one of
the task's quantities or an earlier result, and every quantity must be used. A call that carries the model's own
guess after ``=`` (the calculator evaluates the left side and ignores the rest) is sound if its left side
is, and ``tidy_process`` rewrites it to the call the student should learn: the expression alone, and the plain
result the calculator gives for it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from decimal import Decimal, InvalidOperation

from lamarck.curriculum.calculator import calculator_tool
from lamarck.curriculum.environment import TaskSpec
from lamarck.curriculum.environments.arithmetic import extract_integer
from lamarck.curriculum.environments.arithmetic_hints import solution_steps
from lamarck.platform.storage.trajectory import Message, Trajectory

ProcessCheck = Callable[[TaskSpec, Trajectory, str], str | None]  # -> why the process is not sound, or None

_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?")
_RESULT = re.compile(r"^\s*(-?\d+(?:\.\d+)?)")


def process_problem(task: TaskSpec, trajectory: Trajectory, answer: str) -> str | None:
    """Why this verified pass must not become a training row, or None when its answer follows from its work."""
    check = PROCESS_CHECKS.get(task.environment)
    return check(task, trajectory, answer) if check is not None else None


def arithmetic_process(task: TaskSpec, trajectory: Trajectory, answer: str) -> str | None:
    calls = _calculator_calls(trajectory)
    if not calls:
        return "no_calculation: the answer was not computed with the calculator"
    known: list[Decimal] = []
    quantities = _numbers(str(task.reference.get("expression", "")))
    for expression, result in calls:
        expression = expression.partition("=")[0]
        for number in _numbers(expression):
            if number not in quantities and number not in known:
                return f"unfounded_number: {number} is neither a quantity of the task nor an earlier result"
        if result is not None:
            known.append(result)
    used = [n for expression, _ in calls for n in _numbers(expression.partition("=")[0])]
    missing = [q for q in quantities if q not in used]
    if missing:
        return f"quantity_unused: {', '.join(str(q) for q in missing)} never entered a calculation"
    final, _ = extract_integer(answer)
    last = calls[-1][1]
    if last is None or final is None or Decimal(final) != last:
        return f"answer_not_from_work: answered {final}, the last calculation gave {last}"
    return None


def tidy_arithmetic(trajectory: Trajectory) -> Trajectory:
    """Calculator calls written as ``expression = guess`` become the expression alone, with the plain result."""
    messages = [message.model_copy(deep=True) for message in trajectory.messages]
    tidied: dict[str, str] = {}
    for message in messages:
        if message.role != "assistant" or message.meta.get("few_shot"):
            continue
        calls = message.tool_calls or []
        for index, call in enumerate(calls):
            expression = _argument(call.arguments)
            left, equals, _ = expression.partition("=")
            if call.name != "calculator" or not equals:
                continue
            clean = left.strip().strip("`").strip()
            calls[index] = call.model_copy(update={"arguments": json.dumps({"input": clean})})
            message.content = (message.content or "").replace(expression, clean)
            tidied[call.id] = clean
    for message in messages:
        if message.role == "tool" and message.tool_call_id in tidied:
            observed = _RESULT.match(message.content or "")
            if observed:
                message.content = observed.group(1)
    return Trajectory(messages=messages)


def chain_arithmetic(trajectory: Trajectory) -> Trajectory:
    """Each sound multi-operation calculator call becomes a chain of single-operation calls, each on the result
    of the one before, with the calculator's real result for each; the rest of the trajectory is unchanged.

    The student still learns the model's own solution, only one event of the story per call: trained on the
    reference solutions of 200 training tasks, chains raised the gate slice (training families) more than
    whole-expression calls did, though not the report slice (bench_recipe ``--style``). Rollouts keep
    whole-expression calls, which the base model copies from a hint far more reliably than a list of calls. A call
    whose recorded result is not its expression's value stays as it is.
    """
    messages: list[Message] = []
    source = trajectory.messages
    index = 0
    while index < len(source):
        message = source[index]
        following = source[index + 1] if index + 1 < len(source) else None
        chain = _chain_of(message, following)
        if chain is None or following is None:
            messages.append(message)
            index += 1
            continue
        call = (message.tool_calls or [])[0]
        for number, step in enumerate(chain, start=1):
            call_id = call.id if number == len(chain) else f"{call.id}-step{number}"
            messages.append(
                message.model_copy(
                    update={
                        "content": f"CALL calculator: {step}",
                        "tool_calls": [
                            call.model_copy(update={"id": call_id, "arguments": json.dumps({"input": step})})
                        ],
                    }
                )
            )
            messages.append(following.model_copy(update={"tool_call_id": call_id, "content": calculator_tool(step)}))
        index += 2
    return Trajectory(messages=messages)


def _chain_of(message: Message, following: Message | None) -> list[str] | None:
    """The single-operation calls that replace this message's calculator call, or None to keep it."""
    calls = message.tool_calls or []
    if message.role != "assistant" or message.meta.get("few_shot") or len(calls) != 1 or calls[0].name != "calculator":
        return None
    if following is None or following.role != "tool" or following.tool_call_id != calls[0].id:
        return None
    chain = solution_steps(_argument(calls[0].arguments).partition("=")[0])
    observed = _RESULT.match(following.content or "")
    if chain is None or len(chain) < 2 or observed is None or Decimal(observed.group(1)) != chain[-1][1]:
        return None
    return [step for step, _ in chain]


def tidy_process(task: TaskSpec, trajectory: Trajectory) -> Trajectory:
    """The trajectory with the environment's tidying applied (the same trajectory where there is none)."""
    tidy = PROCESS_TIDY.get(task.environment)
    return tidy(trajectory) if tidy is not None else trajectory


PROCESS_CHECKS: dict[str, ProcessCheck] = {"arithmetic": arithmetic_process}
PROCESS_TIDY: dict[str, Callable[[Trajectory], Trajectory]] = {"arithmetic": tidy_arithmetic}
PROCESS_CHAIN: dict[str, Callable[[Trajectory], Trajectory]] = {"arithmetic": chain_arithmetic}


def chain_process(task: TaskSpec, trajectory: Trajectory) -> Trajectory:
    """The trajectory with the environment's one-operation-per-call rewriting (the same where there is none)."""
    chain = PROCESS_CHAIN.get(task.environment)
    return chain(trajectory) if chain is not None else trajectory


def _calculator_calls(trajectory: Trajectory) -> list[tuple[str, Decimal | None]]:
    """(expression, numeric result or None on error) for each calculator call the model made, in order."""
    results = {m.tool_call_id: m.content or "" for m in trajectory.messages if m.role == "tool"}
    calls = []
    for message in trajectory.messages:
        if message.role != "assistant" or message.meta.get("few_shot"):
            continue
        for call in message.tool_calls or []:
            if call.name != "calculator":
                continue
            expression = _argument(call.arguments)
            observed = _RESULT.match(results.get(call.id, ""))
            calls.append((expression, Decimal(observed.group(1)) if observed else None))
    return calls


def _argument(arguments: str) -> str:
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError:
        return arguments
    if isinstance(parsed, dict):
        return str(next(iter(parsed.values()), ""))
    return str(parsed)


def _numbers(text: str) -> list[Decimal]:
    found = []
    for token in _NUMBER.findall(text.replace(",", "")):
        try:
            found.append(Decimal(token))
        except InvalidOperation:
            continue
    return found
