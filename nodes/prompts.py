"""Prompts of the LLM backend, one constant each."""

RETRIEVAL_DECISION_PROMPT = """You decide whether answering a question needs documents from a \
knowledge base. Answer "no" only for small talk, arithmetic, coding tasks or general knowledge \
any educated person knows; answer "yes" for specific facts, names, dates, numbers, recent or \
domain-specific information, or anything the knowledge base's closest passage touches on.

Closest knowledge-base passage: {best_match}

Question: {question}"""

DOCUMENT_GRADER_PROMPT = """You grade whether a retrieved document is relevant to a question. \
It is relevant if it contains keywords or meaning that help answer the question; it need not \
contain the whole answer. Give binary_score "yes" or "no" and a score from 0 to 1.

Document:
{document}

Question: {question}"""

BATCH_GRADER_PROMPT = """You grade retrieved passages for a question. Score each passage \
from 0 to 10: 0 if it is unrelated, 5 if it contains keywords or meaning that help answer the \
question (it need not contain the whole answer), 10 if it answers it. Reply in "scores" with \
one integer per passage, in the passages' order.

Passages:
{passages}

Question: {question}"""

GROUNDING_GRADER_PROMPT = """You check whether an answer is grounded in a set of facts. \
Say "fully" if every claim is supported by the facts, "partially" if some are, "no" if none are.

Facts:
{documents}

Answer: {answer}"""

USEFULNESS_GRADER_PROMPT = """You check whether an answer resolves a question. Give \
binary_score "yes" if it answers the question, "no" if it does not (evasive, off topic or \
"I don't know").

Question: {question}

Answer: {answer}"""

ANSWER_GRADER_PROMPT = """You check an answer against the facts it was written from. Say in \
"level" whether the facts support it: "fully" if every claim is supported, "partially" if \
some are, "no" if none are. Say in "answers_question" "yes" if it resolves the question, "no" \
if it does not (evasive, off topic or "I don't know").

Facts:
{documents}

Question: {question}

Answer: {answer}"""

REWRITE_PROMPT = """Rewrite the question into a better search query for a vector store: keep \
the names and key facts, drop filler, and if earlier attempts failed try different wording. \
This is attempt {attempt}. Reply with the query only, in the question's language.

Question: {question}"""

SEARCH_QUERY_PROMPT = """Turn the question into a web search query of at most three keywords, \
in the question's language. Reply with the keywords only, separated by spaces.

Question: {question}"""

GENERATE_PROMPT = """You answer questions using only the numbered context passages. Answer \
in the question's language, in at most three sentences, and cite passages like [1]. If the \
context does not contain the answer, say you could not find it.

Context:
{context}

Question: {question}"""

DIRECT_ANSWER_PROMPT = """Answer the question from general knowledge in at most three \
sentences, in the question's language.

Question: {question}"""

JSON_REPLY_SUFFIX = """

Reply with a single JSON object with the fields {fields} and nothing else."""

COMPLEXITY_PROMPT = """Classify how much retrieval a question needs:
- "no_retrieval": small talk, arithmetic, coding tasks or general knowledge;
- "single_step": one lookup in a knowledge base answers it;
- "multi_step": it needs several lookups, e.g. it compares two things or first needs an \
intermediate fact ("the director of the film that ...").
Also say whether it is ambiguous: it points at something ("this API", "it", "这个") that neither \
the question nor the earlier questions name. If so, write one short clarifying question in the \
question's language.

Earlier questions in this conversation: {history}

Question: {question}"""

ROUND_ASSESSMENT_PROMPT = """You assess one round of iterative retrieval for a question. \
Score relevance (0-10: how relevant this round's documents are), completeness (1-10: how \
completely all gathered context answers the question), quality (0-10: how good the draft \
answer is), and list in "missing" the facts or names still missing, as search terms.

This round's documents:
{round_documents}

All gathered context:
{context}

Draft answer: {draft}

Question: {question}"""

NEXT_QUERY_PROMPTS = {
    "alternative": """The last search found little that is relevant. Write a different \
search query for the same question: other words, other angle. Still missing: {missing}. \
Queries already tried (write none of them again): {asked}. Reply with the query only, in the \
question's language.

Question: {question}""",
    "expanded": """The draft answer is incomplete. Write the next search query: follow the \
names and facts the draft found towards what is still missing ({missing}). Queries already \
tried (write none of them again): {asked}. Reply with the query only, in the question's \
language.

Draft: {draft}

Question: {question}""",
}
