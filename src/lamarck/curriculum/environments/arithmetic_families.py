"""Template families for arithmetic word problems: one coherent scenario each, many phrasings per operation.

A family tracks one running quantity (what a person has, a score, the people in a room...) and every step
sentence changes it by one operation. Placeholders: ``{name}``, pronouns ``{pron}``/``{Pron}`` (she/he),
``{poss}``/``{Poss}`` (her/his), ``{obj}`` (her/him), ``{item}`` (the counted thing, plural), ``{n}`` (the
step's operand), and in openings ``{a}`` and ``{b}`` (the start and the first step's operand in one sentence).

``TRAINING_FAMILIES`` feed training, the dev slice and the gate; ``REPORT_FAMILIES`` only the report slice, so it
measures transfer to scenarios and sentences the model never trained on. ``cues`` list the phrasings per
operation for the environment's glossary (training families only).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

OPS: tuple[str, ...] = ("add", "sub", "mul", "div", "mod")


@dataclass(frozen=True)
class Family:
    name: str
    items: tuple[str, ...]
    start: tuple[str, ...]
    steps: Mapping[str, tuple[str, ...]]
    questions: tuple[str, ...]
    if_questions: tuple[str, ...]
    distractors: tuple[str, ...]
    openings: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    cues: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def ops(self) -> frozenset[str]:
        return frozenset(op for op, templates in self.steps.items() if templates)

    def templates(self) -> tuple[str, ...]:
        """Every template string of the family (for the leak tests)."""
        out = [*self.start, *self.questions, *self.if_questions, *self.distractors]
        for group in (self.steps, self.openings):
            for templates in group.values():
                out.extend(templates)
        return tuple(out)


INVENTORY = Family(
    name="inventory",
    items=("stickers", "marbles", "stamps", "shells", "cards", "beads", "buttons", "pencils", "books", "coins"),
    start=(
        "{name} has {n} {item}.",
        "{name} owns a collection of {n} {item}.",
        "There are {n} {item} in {name}'s drawer.",
        "{name} starts the day with {n} {item}.",
    ),
    steps={
        "add": (
            "{Pron} gets {n} more {item}.",
            "A friend gives {obj} {n} {item}.",
            "{name} buys {n} {item} at the market.",
            "{Pron} finds {n} extra {item}.",
            "{Poss} cousin adds {n} {item} to the collection.",
            "Later, {name} receives another {n} {item} as a gift.",
        ),
        "sub": (
            "{Pron} gives away {n} {item}.",
            "{name} sells {n} of the {item}.",
            "{Pron} loses {n} {item}.",
            "{name} trades away {n} {item} to a classmate.",
            "{n} of the {item} get damaged and are thrown out.",
        ),
        "mul": (
            "{name} ends up with {n} times as many {item} as before.",
            "Each of the {item} is swapped for {n} new ones.",
            "The collection grows to {n} times its size.",
        ),
        "div": (
            "{Pron} shares all the {item} equally among {n} friends and keeps one friend's share "
            "(leftovers are thrown away).",
            "{name} splits the {item} into {n} equal piles as large as possible and keeps just one pile.",
        ),
        "mod": (
            "{Pron} packs the {item} into bags of {n}, gives every full bag away and keeps only the leftovers.",
            "{name} lays the {item} out in rows of {n}; the full rows are given away and the rest stay with {obj}.",
        ),
    },
    questions=(
        "How many {item} does {name} have now?",
        "How many {item} does {name} end up with?",
        "What is the number of {item} {name} has at the end?",
        "Find how many {item} {name} has left.",
    ),
    if_questions=("How many {item} does {name} have at the end if {clauses}?",),
    distractors=(
        "{name} is {n} years old.",
        "{Poss} shelf has {n} hooks on it.",
        "{Poss} best friend lives {n} houses away.",
    ),
    openings={
        "add": ("{name} has {a} red {item} and {b} blue {item}.",),
        "mul": ("{name} has {a} boxes with {b} {item} in each box.",),
    },
    cues={
        "add": ("gets N more", "a friend gives N", "buys N", "finds N", "receives N"),
        "sub": ("gives away N", "sells N", "loses N", "trades away N", "N are thrown out"),
        "mul": ("N times as many", "each one is swapped for N", "A boxes with B in each box"),
        "div": ("shares equally among N friends and keeps one share", "N equal piles, keeps one pile"),
        "mod": ("packs into bags of N, gives the full bags away, keeps only the leftovers",),
    },
)

MONEY = Family(
    name="money",
    items=("dollars", "euros"),
    start=(
        "{name} has {n} {item} in {poss} wallet.",
        "{name} has saved {n} {item}.",
        "At the start of the week {name} has {n} {item}.",
    ),
    steps={
        "add": (
            "{Pron} earns {n} {item} mowing lawns.",
            "{Poss} aunt sends {obj} {n} {item}.",
            "{name} is paid {n} {item} for babysitting.",
            "{Pron} wins {n} {item} in a raffle.",
        ),
        "sub": (
            "{Pron} spends {n} {item} on a book.",
            "{name} pays {n} {item} for lunch.",
            "A ticket to the fair costs {obj} {n} {item}.",
            "{Pron} lends {n} {item} to a friend.",
        ),
        "mul": (
            "{Poss} savings grow to {n} times as much.",
            "A bank promotion multiplies {poss} money by {n}.",
        ),
        "div": (
            "{Pron} splits the money equally among {n} people, in whole {item}, and keeps one person's share.",
            "{name} divides the money into {n} equal envelopes of whole {item}, keeps one envelope "
            "and donates the rest.",
        ),
        "mod": (
            "{Pron} buys as many tickets as possible at {n} {item} each and keeps the change.",
            "{name} puts the money into stacks of {n} {item}, hands every full stack to the bank "
            "and keeps what is left over.",
        ),
    },
    questions=(
        "How many {item} does {name} have now?",
        "How much money, in {item}, does {name} have left?",
        "What is {name}'s balance in {item} at the end?",
        "Work out how many {item} {name} ends up with.",
    ),
    if_questions=("How many {item} does {name} have left if {clauses}?",),
    distractors=(
        "A sandwich at the corner shop costs {n} {item}, but {name} does not buy one.",
        "{Poss} bank opened {n} years ago.",
        "{name} checks {poss} account {n} times a month.",
    ),
    openings={
        "add": ("{name} has {a} {item} in cash and {b} {item} on a gift card.",),
        "mul": ("{name} earns {a} {item} an hour and works {b} hours.",),
    },
    cues={
        "add": ("earns N", "is paid N", "wins N", "someone sends N"),
        "sub": ("spends N", "pays N", "costs N", "lends N"),
        "mul": ("earns A an hour and works B hours", "grows to N times as much", "multiplies by N"),
        "div": ("splits the money equally among N people and keeps one share",),
        "mod": ("buys as many as possible at N each and keeps the change", "stacks of N, keeps what is left over"),
    },
)

FACTORY = Family(
    name="factory",
    items=("bottles", "toys", "bolts", "jars", "bricks"),
    start=(
        "A machine has made {n} {item} so far.",
        "There are {n} {item} on the factory floor.",
        "{name} counts {n} {item} on the conveyor belt.",
    ),
    steps={
        "add": (
            "The machine makes {n} more {item}.",
            "A second line adds {n} {item}.",
            "Another {n} {item} arrive from the night shift.",
        ),
        "sub": (
            "{n} of the {item} fail inspection and are scrapped.",
            "A truck takes {n} {item} away.",
            "{name} removes {n} damaged {item}.",
        ),
        "mul": (
            "Production is scaled up to {n} times that amount.",
            "The machine repeats that output every hour for {n} hours in total.",
        ),
        "div": (
            "The {item} are divided into {n} equal shares; one share stays on the floor and the other shares "
            "and any leftovers are shipped.",
        ),
        "mod": (
            "The {item} are packed into cartons of {n}; full cartons are shipped and the rest stay on the floor.",
            "Workers fill crates that hold exactly {n} {item}, ship every full crate and leave the remainder.",
        ),
    },
    questions=(
        "How many {item} are there now?",
        "How many {item} remain at the end?",
        "What is the final count of {item}?",
    ),
    if_questions=("How many {item} remain if {clauses}?",),
    distractors=(
        "The factory has {n} windows.",
        "{name} has worked there for {n} years.",
        "The machine was serviced {n} days ago.",
    ),
    openings={
        "mul": (
            "A machine makes {a} {item} per hour and runs for {b} hours.",
            "Each of {a} workers packs {b} {item}.",
        ),
    },
    cues={
        "add": ("makes N more", "adds N", "another N arrive"),
        "sub": ("N are scrapped", "takes N away", "removes N"),
        "mul": ("makes A per hour and runs for B hours", "each of A workers packs B", "scaled up to N times"),
        "div": ("divided into N equal shares, one share stays",),
        "mod": ("packed into cartons of N, full cartons are shipped, the rest stay",),
    },
)

WAREHOUSE = Family(
    name="warehouse",
    items=("parcels", "boxes", "cans", "tins", "sacks"),
    start=(
        "A warehouse stores {n} {item}.",
        "There are {n} {item} in the warehouse.",
        "The warehouse starts the month with {n} {item}.",
    ),
    steps={
        "add": (
            "A delivery brings {n} more {item}.",
            "{name} unloads {n} {item} from a van.",
            "{n} {item} are returned by customers.",
        ),
        "sub": (
            "{n} {item} are sent out to customers.",
            "{name} loads {n} {item} onto a truck.",
            "A courier collects {n} {item}.",
        ),
        "mul": (
            "After a big order the stock is {n} times as large.",
            "{name} orders enough to have {n} times as many {item}.",
        ),
        "div": (
            "The {item} are divided into {n} equal lots as large as possible; one lot stays in the warehouse "
            "and everything else is sold.",
        ),
        "mod": (
            "The {item} are stacked on pallets of {n}; every full pallet is shipped and the leftover {item} stay.",
        ),
    },
    questions=(
        "How many {item} are in the warehouse now?",
        "How many {item} does the warehouse hold at the end?",
        "Find the number of {item} left in the warehouse.",
    ),
    if_questions=("How many {item} are in the warehouse at the end if {clauses}?",),
    distractors=(
        "The warehouse has {n} doors.",
        "{name} drives {n} minutes to work.",
        "The building is {n} metres long.",
    ),
    openings={"mul": ("The warehouse has {a} shelves with {b} {item} on each.",)},
    cues={
        "add": ("a delivery brings N", "unloads N", "N are returned"),
        "sub": ("N are sent out", "loads N onto a truck", "a courier collects N"),
        "mul": ("A shelves with B on each", "N times as large"),
        "div": ("divided into N equal lots, one lot stays",),
        "mod": ("stacked on pallets of N, full pallets are shipped, the leftovers stay",),
    },
)

BAKERY = Family(
    name="bakery",
    items=("grams of flour", "grams of sugar", "millilitres of milk", "grams of butter"),
    start=(
        "{name} puts {n} {item} into a bowl.",
        "A mixing bowl holds {n} {item}.",
        "{name} measures {n} {item} into the bowl.",
    ),
    steps={
        "add": (
            "{name} adds {n} more {item}.",
            "{Pron} pours in another {n} {item}.",
            "The recipe needs {n} extra {item}, which go into the bowl.",
        ),
        "sub": (
            "{n} {item} spill on the counter.",
            "{name} takes out {n} {item}.",
            "{Pron} sets aside {n} {item} for later.",
        ),
        "mul": (
            "{name} makes {n} batches of that amount in the bowl.",
            "{Pron} multiplies the amount by {n} to feed a crowd.",
        ),
        "div": (
            "{Pron} divides the mixture into {n} equal portions (whole numbers only, the remainder goes in the bin) "
            "and keeps one portion in the bowl.",
        ),
        "mod": (
            "{Pron} fills jars holding exactly {n} {item} each and keeps in the bowl whatever is too little "
            "to fill another jar.",
        ),
    },
    questions=(
        "How many {item} are in the bowl at the end?",
        "How many {item} are left in the bowl?",
        "What amount of {item} is in the bowl now?",
    ),
    if_questions=("How many {item} are in the bowl if {clauses}?",),
    distractors=(
        "The timer is set for {n} minutes.",
        "{name} owns {n} cookbooks.",
        "The kitchen has {n} drawers.",
    ),
    openings={
        "add": ("{name} mixes {a} {item} with another {b} {item} in a bowl.",),
        "mul": ("A recipe needs {a} {item} per cake, and {name} puts enough for {b} cakes into the bowl.",),
    },
    cues={
        "add": ("adds N more", "pours in N", "needs N extra"),
        "sub": ("N spill", "takes out N", "sets aside N"),
        "mul": ("makes N batches", "A per cake for B cakes", "multiplies by N"),
        "div": ("divides into N equal portions and keeps one",),
        "mod": ("fills jars of N and keeps what is too little for another jar",),
    },
)

TRAVEL = Family(
    name="travel",
    items=("kilometres", "miles"),
    start=(
        "{name}'s destination is {n} {item} away.",
        "{name} still has {n} {item} to go before reaching the lake.",
        "The hotel is {n} {item} from where {name} starts.",
    ),
    steps={
        "add": (
            "A road closure adds {n} {item} to the route.",
            "{name} takes a wrong turn, which adds {n} {item} to the remaining distance.",
            "A detour makes the rest of the trip {n} {item} longer.",
        ),
        "sub": (
            "{Pron} drives {n} {item}.",
            "{name} cycles {n} {item} before lunch.",
            "After a break {pron} covers another {n} {item}.",
        ),
    },
    questions=(
        "How many {item} are left to travel?",
        "How far, in {item}, is {name} from the destination now?",
        "How many {item} does {name} still have to go?",
    ),
    if_questions=("How many {item} are left if {clauses}?",),
    distractors=(
        "{name} stops for {n} minutes at a cafe.",
        "The car has {n} seats.",
        "{Poss} map is {n} years old.",
    ),
    cues={
        "add": ("a detour adds N", "N longer"),
        "sub": ("drives N", "cycles N", "covers N (of the distance still to go)"),
    },
)

SCORES = Family(
    name="scores",
    items=("points",),
    start=(
        "{name} has {n} {item} in a board game.",
        "After the first round {name}'s score is {n} {item}.",
        "{name} starts the quiz with {n} {item}.",
    ),
    steps={
        "add": (
            "{Pron} scores {n} more {item}.",
            "A bonus card gives {obj} {n} {item}.",
            "{Pron} wins a round worth {n} {item}.",
        ),
        "sub": (
            "{Pron} loses {n} {item} for a penalty.",
            "A trap card takes away {n} {item}.",
            "{name} answers wrong and {n} {item} are deducted.",
        ),
        "mul": (
            "A lucky spin multiplies {poss} score by {n}.",
            "The golden round makes {poss} score {n} times as big.",
        ),
        "div": ("{Poss} score is divided by {n}, rounding down.",),
        "mod": (
            "{Pron} trades {item} for prizes at {n} {item} each, as many prizes as possible, "
            "and keeps the {item} left over.",
        ),
    },
    questions=(
        "What is {name}'s score now?",
        "How many {item} does {name} have at the end of the game?",
        "What score does {name} finish with?",
    ),
    if_questions=("What is {name}'s final score if {clauses}?",),
    distractors=(
        "The game has {n} players.",
        "Each round lasts {n} minutes.",
        "{name}'s team wears shirt number {n}.",
    ),
    openings={
        "add": ("{name} scores {a} {item} in the first half and {b} {item} in the second half.",),
        "mul": ("{name} wins {a} rounds worth {b} {item} each.",),
    },
    cues={
        "add": ("scores N more", "a bonus gives N", "wins a round worth N"),
        "sub": ("loses N", "takes away N", "N are deducted"),
        "mul": ("multiplies the score by N", "A rounds worth B each", "N times as big"),
        "div": ("the score is divided by N, rounding down",),
        "mod": ("trades for prizes at N each, as many as possible, keeps what is left over",),
    },
)

CLASSROOM = Family(
    name="classroom",
    items=("students", "children", "pupils"),
    start=(
        "There are {n} {item} in the classroom.",
        "{name}'s classroom holds {n} {item}.",
        "{n} {item} are sitting in the classroom.",
    ),
    steps={
        "add": (
            "{n} more {item} walk in.",
            "Another {n} {item} come into the room.",
            "{name} brings {n} {item} in from the hall.",
        ),
        "sub": (
            "{n} {item} leave for a music lesson.",
            "{n} of the {item} go home early.",
            "{name} sends {n} {item} to the library.",
        ),
        "mul": ("The room is joined with others so that there are {n} times as many {item} in it.",),
        "div": (
            "The {item} are split into {n} equal teams as large as possible; only one team stays in the room "
            "and everyone else goes outside.",
        ),
        "mod": ("The {item} line up in rows of {n}; those in full rows go outside and the rest stay in the room.",),
    },
    questions=(
        "How many {item} are in the room now?",
        "How many {item} are still in the room?",
        "Count the {item} in the room at the end.",
    ),
    if_questions=("How many {item} are in the room if {clauses}?",),
    distractors=(
        "The classroom has {n} windows.",
        "{name} has taught for {n} years.",
        "The lesson lasts {n} minutes.",
    ),
    openings={"mul": ("There are {a} tables in the classroom with {b} {item} at each.",)},
    cues={
        "add": ("N more walk in", "another N come in", "brings N in"),
        "sub": ("N leave", "N go home", "sends N away"),
        "mul": ("A tables with B at each", "N times as many"),
        "div": ("split into N equal teams, only one team stays",),
        "mod": ("line up in rows of N, full rows go outside, the rest stay",),
    },
)

GARDEN = Family(
    name="garden",
    items=("tomatoes", "carrots", "apples", "pumpkins", "strawberries"),
    start=(
        "{name} picks {n} {item} from the garden.",
        "A basket holds {n} {item}.",
        "{name} harvests {n} {item}.",
    ),
    steps={
        "add": (
            "{Pron} picks {n} more {item}.",
            "{Poss} neighbour brings over {n} {item}.",
            "Another {n} {item} ripen and go into the basket.",
        ),
        "sub": (
            "Birds peck {n} of the {item}, which are thrown away.",
            "{name} eats {n} {item}.",
            "{Pron} gives {n} {item} to the neighbours.",
        ),
        "mul": ("By autumn {pron} has {n} times as many {item}.",),
    },
    questions=(
        "How many {item} does {name} have now?",
        "How many {item} are in the basket at the end?",
        "How many {item} are left?",
    ),
    if_questions=("How many {item} are left if {clauses}?",),
    distractors=(
        "The garden is {n} metres wide.",
        "{name} waters the plants every {n} days.",
        "The fence has {n} posts.",
    ),
    openings={"mul": ("{name} has {a} plants and picks {b} {item} from each.",)},
    cues={
        "add": ("picks N more", "brings over N", "another N ripen"),
        "sub": ("birds peck N", "eats N", "gives N to the neighbours"),
        "mul": ("A plants and B from each", "N times as many"),
    },
)

TRANSIT = Family(
    name="transit",
    items=("passengers", "riders", "commuters"),
    start=(
        "A bus leaves the depot with {n} {item} on board.",
        "{n} {item} are riding the tram.",
        "Driver {name} counts {n} {item} aboard.",
    ),
    steps={
        "add": (
            "At the next stop, {n} {item} climb on.",
            "{n} more {item} board at the station.",
            "A crowd of {n} {item} squeezes in.",
        ),
        "sub": (
            "{n} {item} get off at the market.",
            "At the bridge, {n} {item} step off.",
            "{n} of the {item} hop off near the park.",
        ),
        "mul": (
            "At rush hour the load swells to {n} times the size.",
            "A longer vehicle replaces it, carrying {n} times as many {item}.",
        ),
        "div": (
            "Everyone aboard is split evenly across {n} buses, any extra people take a taxi, and we follow "
            "just one of those buses.",
        ),
        "mod": (
            "{item} leave in full groups of {n}, so only the ones who could not form a complete group remain aboard.",
        ),
    },
    questions=(
        "How many {item} are on board at the end?",
        "How many {item} remain aboard?",
        "What is the final headcount of {item} on the vehicle?",
    ),
    if_questions=("How many {item} are aboard once the ride is over if {clauses}?",),
    distractors=(
        "The route is number {n}.",
        "The ride takes {n} minutes.",
        "The vehicle was built {n} years ago.",
    ),
    openings={
        "add": ("{a} {item} sit and {b} {item} stand.",),
        "mul": ("{a} buses set off, each carrying {b} {item}, and they merge their loads.",),
    },
)

AQUARIUM = Family(
    name="aquarium",
    items=("fish", "guppies", "tadpoles"),
    start=(
        "An aquarium holds {n} {item}.",
        "{name}'s tank is home to {n} {item}.",
        "The pet shop's tank contains {n} {item}.",
    ),
    steps={
        "add": (
            "{name} releases {n} new {item} into the tank.",
            "{n} baby {item} hatch.",
            "The pet store delivers {n} {item} in a plastic bag.",
        ),
        "sub": (
            "{n} {item} are moved to a quarantine tank.",
            "A customer buys {n} of the {item}.",
            "{n} {item} are scooped out with a net.",
        ),
        "mul": ("After breeding season the tank has {n} times as many {item}.",),
        "div": (
            "{name} sorts the {item} into {n} tanks with equal numbers, sends spare ones back to the shop, "
            "and looks only at one tank.",
        ),
        "mod": ("{name} nets the {item} out {n} at a time until fewer than {n} are left in the tank.",),
    },
    questions=(
        "How many {item} swim in the tank at the end?",
        "How many {item} are left in the tank?",
        "What is the final number of {item} in the tank?",
    ),
    if_questions=("How many {item} swim in the tank afterwards if {clauses}?",),
    distractors=(
        "The filter was cleaned {n} days ago.",
        "{name} sprinkles {n} flakes of food at noon.",
        "The glass is {n} millimetres thick.",
    ),
    openings={"mul": ("{name} keeps {a} tanks with {b} {item} swimming in each, then pours them together.",)},
)

WATER_TANK = Family(
    name="water_tank",
    items=("litres",),
    start=(
        "A rain barrel contains {n} {item} of water.",
        "{name}'s cistern is filled with {n} {item} of water.",
        "The water tank on the roof holds {n} {item}.",
    ),
    steps={
        "add": (
            "A storm adds {n} {item}.",
            "{name} pumps in {n} {item} more.",
            "A hose runs until {n} extra {item} have flowed in.",
        ),
        "sub": (
            "{name} waters the lawn with {n} {item}.",
            "A leak drains {n} {item}.",
            "{n} {item} evaporate in the sun.",
        ),
        "mul": ("The water level climbs until the volume is {n} times what it was.",),
        "div": (
            "The water is poured evenly into {n} barrels, whole {item} only, the spare water is tipped out, "
            "and only one barrel is kept.",
        ),
        "mod": (
            "{name} fills as many buckets of {n} {item} as possible and carries them away; the rest stays behind.",
        ),
    },
    questions=(
        "How many {item} of water are stored now?",
        "What volume, in {item}, remains?",
        "How much water is left, in {item}?",
    ),
    if_questions=("How many {item} of water remain if {clauses}?",),
    distractors=(
        "It rains on {n} days this month.",
        "The garden hose is {n} metres long.",
        "{name} bought the barrel {n} years ago.",
    ),
    openings={"mul": ("{a} pipes each deliver {b} {item} of water into an empty tank.",)},
)

TRAINING_FAMILIES: tuple[Family, ...] = (
    INVENTORY, MONEY, FACTORY, WAREHOUSE, BAKERY, TRAVEL, SCORES, CLASSROOM, GARDEN,
)  # fmt: skip
REPORT_FAMILIES: tuple[Family, ...] = (TRANSIT, AQUARIUM, WATER_TANK)
FAMILIES_BY_NAME: dict[str, Family] = {family.name: family for family in TRAINING_FAMILIES + REPORT_FAMILIES}
