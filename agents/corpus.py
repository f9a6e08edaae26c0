"""The text the project's own tokenizer is trained on: the envs' language, generated deterministically.

The tiny test models need a vocabulary that covers what they read and write: the paper's ALFWorld and
WebShop prompt templates (``sapo_gym.prompts``), ALFWorld's observation/command language (the ALFRED
object and receptacle names, the engine's sentences), WebShop's search/click language, real
``sapo/Vault-v0`` episodes, and ``<think>…</think><action>…</action>`` answers. Everything here is
generated from fixed lists with a seeded RNG, so the corpus, and the tokenizer trained on it, are
the same on every machine (no dataset is read).
"""

from __future__ import annotations

import random
from collections.abc import Iterator

# The shipped tokenizer was trained on the sapo-gym-v1 template text; pinning it here keeps the asset
# rebuilding bit for bit (the verl-agent@7b68c51 templates differ from it in a few words only).
from sapo_gym.prompts import ALFWORLD_PROMPT_V1 as ALFWORLD_PROMPT, WEBSHOP_PROMPT_V1 as WEBSHOP_PROMPT, PromptTemplate

__all__ = ["corpus", "ALFRED_OBJECTS", "ALFRED_RECEPTACLES"]

ALFRED_OBJECTS = (
    "alarmclock apple baseballbat basketball book bowl box bread butterknife candle cd cellphone cloth "
    "creditcard cup dishsponge egg fork glassbottle handtowel houseplant kettle keychain knife ladle laptop "
    "lettuce lightswitch mirror mug newspaper painting pan papertowelroll pen pencil peppershaker pillow "
    "plate plunger pot potato remotecontrol saltshaker scrubbrush showerdoor soapbar soapbottle spatula "
    "spoon spraybottle statue teddybear television tennisracket tissuebox toiletpaper towel vase watch "
    "wateringcan window winebottle desklamp floorlamp"
).split()
ALFRED_RECEPTACLES = (
    "armchair bathtubbasin bed cabinet cart coffeemachine coffeetable countertop desk diningtable drawer "
    "dresser fridge garbagecan handtowelholder laundryhamper microwave ottoman safe shelf sidetable "
    "sinkbasin sofa stoveburner toaster toilet toiletpaperhanger towelholder"
).split()
_TASKS = (
    "put a {o} in {r}.",
    "put some {o} on {r}.",
    "put a clean {o} in {r}.",
    "clean some {o} and put it in {r}.",
    "put a hot {o} in {r}.",
    "heat some {o} and put it in {r}.",
    "put a cool {o} in {r}.",
    "cool some {o} and put it in {r}.",
    "look at {o} under the desklamp.",
    "examine the {o} with the desklamp.",
    "find two {o} and put them in {r}.",
    "put two {o} in {r}.",
)
_WEB_NOUNS = (
    "shirt t-shirt dress jeans shorts hoodie jacket sweater leggings shoes sneakers boots sandals socks hat "
    "bag backpack wallet watch necklace earrings bracelet ring wig hair extension shampoo conditioner lotion "
    "serum cream moisturizer sunscreen lipstick mascara eyeliner perfume toothbrush toothpaste razor "
    "coffee tea snacks cookies chocolate nuts protein bar vitamins candle pillow blanket curtain rug lamp "
    "chair table desk shelf mattress sheets towel phone case charger cable headphones speaker keyboard "
    "mouse monitor laptop stand tablet camera tripod"
).split()
_WEB_ATTRS = (
    "long short natural organic vegan gluten free sugar free non-toxic waterproof lightweight wireless "
    "portable slim fit loose fit machine washable easy to clean high quality long lasting rechargeable "
    "stainless steel cotton leather wool silk memory foam anti-slip quick dry bluetooth usb-c"
).split()
_WEB_COLOURS = "black white grey navy blue red pink green beige brown khaki purple gold silver multicolor".split()
_WEB_SIZES = "x-small small medium large x-large xx-large 3x-large 6 7 8 9 10 11 12 28w 30w 32w 34w".split()
_WORDS = (
    "the a an of to in on at for with from by and or but not no yes is are was were be been being have has "
    "had do does did will would can could should may might must i you he she it we they me him her us them "
    "my your his its our their this that these those here there where when why how what which who whom "
    "first then next after before now still already again only also just very more most less least all "
    "each every some any many much few other another same different new old good bad best better right "
    "left up down out over under into onto near far inside outside open closed empty full hot cold clean "
    "dirty need want find take put place go move look see check search buy click choose select return "
    "because so if else while until since goal task step action observation room item object product "
    "price dollars size color quantity option page result results next previous back description "
    "features reviews rating should must think reasoning carefully current situation admissible"
).split()


def _alfworld_state(rng: random.Random) -> tuple[str, str, list[str], str]:
    """(task, observation, admissible actions, action) for one synthetic ALFWorld turn."""
    recs = [f"{r} {rng.randint(1, 4)}" for r in rng.sample(ALFRED_RECEPTACLES, rng.randint(4, 12))]
    objs = [f"{o} {rng.randint(1, 3)}" for o in rng.sample(ALFRED_OBJECTS, rng.randint(1, 6))]
    task = rng.choice(_TASKS).format(o=rng.choice(ALFRED_OBJECTS), r=rng.choice(ALFRED_RECEPTACLES))
    here, obj = rng.choice(recs), rng.choice(objs)
    seen = ", ".join(f"a {o}" for o in objs[:-1]) + (f", and a {objs[-1]}" if len(objs) > 1 else f"a {objs[-1]}")
    obs = rng.choice(
        [
            "You are in the middle of a room. Looking quickly around you, you see "
            + ", ".join(f"a {r}" for r in recs)
            + f".\n\nYour task is to: {task}",
            f"You arrive at {here}. On the {here}, you see {seen}.",
            f"You arrive at {here}. The {here} is closed.",
            f"You open the {here}. The {here} is open. In it, you see {seen}.",
            f"You open the {here}. The {here} is open. In it, you see nothing.",
            f"You close the {here}.",
            f"You pick up the {obj} from the {here}.",
            f"You move the {obj} to the {here}.",
            f"You heat the {obj} using the microwave 1.",
            f"You cool the {obj} using the fridge 1.",
            f"You clean the {obj} using the sinkbasin 1.",
            "You turn on the desklamp 1.",
            "Nothing happens.",
            f"You are carrying: a {obj}.",
            "You are not carrying anything.",
        ]
    )
    acts = (
        [f"go to {r}" for r in recs]
        + [f"take {o} from {here}" for o in objs]
        + [
            f"open {here}",
            f"close {here}",
            f"examine {here}",
            f"move {obj} to {here}",
            f"heat {obj} with microwave 1",
            f"cool {obj} with fridge 1",
            f"clean {obj} with sinkbasin 1",
            "use desklamp 1",
            "inventory",
            "look",
        ]
    )
    return task, obs, sorted(acts), rng.choice(acts)


def _webshop_state(rng: random.Random) -> tuple[str, str, list[str], str]:
    """(instruction, observation, admissible actions, action) for one synthetic WebShop turn."""
    noun = rng.choice(_WEB_NOUNS)
    attrs = " ".join(rng.sample(_WEB_ATTRS, 2))
    price = f"{rng.randint(5, 150)}.{rng.choice(['00', '99', '50'])}"
    task = (
        f"i need {attrs} {noun} with color: {rng.choice(_WEB_COLOURS)}, and size: {rng.choice(_WEB_SIZES)}, "
        f"and price lower than {price} dollars"
    )
    asins = [f"B0{rng.randint(10**7, 10**8 - 1):08d}"[:10].upper() for _ in range(3)]
    titles = [f"{rng.choice(_WEB_ATTRS).title()} {rng.choice(_WEB_NOUNS).title()} for Women Men" for _ in asins]
    obs = rng.choice(
        [
            "'WebShop [SEP] Instruction: [SEP] " + task + " [SEP] Search'",
            "'Back to Search' [SEP] 'Page 1 (Total results: 50)' [SEP] 'Next >' [SEP] "
            + " [SEP] ".join(f"'{a}' [SEP] '{t}' [SEP] '${rng.randint(3, 99)}.99'" for a, t in zip(asins, titles)),
            f"'Back to Search' [SEP] '< Prev' [SEP] 'color' [SEP] '{rng.choice(_WEB_COLOURS)}' [SEP] 'size' [SEP] "
            f"'{rng.choice(_WEB_SIZES)}' [SEP] '{titles[0]}' [SEP] 'Price: ${price}' [SEP] 'Rating: N.A.' [SEP] "
            "'Description' [SEP] 'Features' [SEP] 'Reviews' [SEP] 'Buy Now'",
        ]
    )
    acts = [
        "search[" + f"{attrs} {noun}" + "]",
        "click[back to search]",
        "click[next >]",
        "click[< prev]",
        "click[buy now]",
        "click[description]",
        "click[features]",
    ] + [f"click[{a.lower()}]" for a in asins]
    return task, obs, acts, rng.choice(acts)


def _prompt(template: PromptTemplate, rng: random.Random, state: tuple[str, str, list[str], str]) -> str:
    task, obs, acts, _ = state
    fields = {"task_description": task, "current_observation": obs, "admissible_actions": template.format_actions(acts)}
    if rng.random() < 0.3:
        return template.first.format(**fields)
    step = rng.randint(1, 30)
    history = "".join(f"\n[Observation {step - 1 + i}: '{obs}', Action {step - 1 + i}: '{acts[0]}']" for i in range(2))
    return template.later.format(
        **fields, step_count=step, history_length=2, action_history=history, current_step=step + 1
    )


def _answer(rng: random.Random, action: str) -> str:
    words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 25)))
    return f"<think>{words}</think><action>{action}</action>"


def _chat(prompt: str, answer: str) -> str:
    """One exchange in ChatML, the layout of the chat template (``agents.offline_models.CHAT_TEMPLATE``)."""
    return f"<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n{answer}<|im_end|>\n"


def _vault_texts() -> Iterator[str]:
    """Real ``sapo/Vault-v0`` prompts (expert play, then one wrong press) for a few settings."""
    import gymnasium as gym

    for buttons, length in ((3, 2), (5, 3), (8, 4)):
        env = gym.make("sapo/Vault-v0", num_buttons=buttons, code_length=length, num_tasks=4)
        for task in range(4):
            obs, info = env.reset(options={"task_index": task})
            for _ in range(length + 1):
                action = info["expert_action"] or "press red"
                answer = _answer(random.Random(task), action)
                yield _chat(obs, answer)
                obs, _, term, trunc, info = env.step(answer)
                if term or trunc:
                    break
        env.close()


def corpus(num_turns: int = 1500, seed: int = 0) -> Iterator[str]:
    """The tokenizer's training text, one document at a time (deterministic for a given seed)."""
    rng = random.Random(seed)
    yield " ".join(_WORDS + list(ALFRED_OBJECTS) + list(ALFRED_RECEPTACLES) + _WEB_NOUNS + _WEB_ATTRS)
    yield from _vault_texts()
    for _ in range(num_turns):
        for template, state in ((ALFWORLD_PROMPT, _alfworld_state(rng)), (WEBSHOP_PROMPT, _webshop_state(rng))):
            yield _chat(_prompt(template, rng, state), _answer(rng, state[3]))
