"""An English stopword list for topic modelling.

Topic models spend their capacity on the most frequent words unless those are
removed first, and in English the most frequent words are function words that
say nothing about a document's subject. :data:`ENGLISH_STOPWORDS` lists about
370 of them: articles, pronouns, prepositions, conjunctions, auxiliary and
modal verbs, quantifiers, common adverbs, and the fragments that contractions
leave behind once a tokenizer splits at the apostrophe (``don``, ``ve``,
``ll``), number words, and a few very common light verbs and nouns
(``said``, ``make``, ``thing``). All entries are lower case; single letters
are absent because the default tokenizer (:class:`lsdask.io.ingest.words.Tokenizer`)
keeps only words of two or more letters.

The list was written for this project by grouping words by grammatical role;
it deliberately leaves out content words that are frequent in some corpora
(``people``, ``year``, ``government``), which document-frequency pruning
(``max_df``) handles per corpus instead.
"""

from __future__ import annotations

__all__ = ["ENGLISH_STOPWORDS"]

_ARTICLES_AND_DETERMINERS = """
    an the this that these those such what which whatever whichever whose
"""

_PRONOUNS = """
    me my mine myself we us our ours ourselves you your yours yourself
    yourselves he him his himself she her hers herself it its itself they them
    their theirs themselves who whom whoever whomever one ones oneself
    someone somebody something anyone anybody anything everyone everybody
    everything nobody nothing none
"""

_PREPOSITIONS = """
    about above across after against along amid among amongst around as at
    before behind below beneath beside besides between beyond but by despite
    down during except for from in inside into like near of off on onto out
    outside over past per since than through throughout till to toward towards
    under underneath unlike until up upon versus via with within without
"""

_CONJUNCTIONS = """
    and or nor so yet either neither both whether if unless because although
    though while whereas whereby wherein whereupon whenever wherever however
    therefore thus hence moreover furthermore nevertheless nonetheless
    otherwise meanwhile accordingly
"""

_AUXILIARIES_AND_MODALS = """
    am is are was were be been being have has had having do does did doing
    done can could may might must shall should will would ought
"""

_CONTRACTION_FRAGMENTS = """
    don doesn didn isn aren wasn weren hasn haven hadn won wouldn couldn
    shouldn mustn mightn needn shan ain ve ll re
"""

_QUANTIFIERS = """
    all any each every few fewer many more most much several some enough
    less least lot lots other others another own same various
"""

_ADVERBS = """
    again already also always almost anyway anyhow anywhere else elsewhere
    ever even here hereby herein how indeed just later maybe merely namely
    never now often once only perhaps quite rather really seldom sometimes
    somewhat somewhere soon still then there thereafter thereby therein
    thereupon too very well when where why not yes ok okay rarely instead
    together away back ago further furthermore fairly nearly hardly
"""

_NUMBER_WORDS = """
    two three four five six seven eight nine ten first second third
    hundred thousand
"""

_COMMON_LIGHT_VERBS = """
    get gets got getting make makes made making go goes went gone going
    come comes came coming take takes took taken taking give gives gave given
    say says said saying see seen let lets put seem seems seemed become
    becomes became use used using want wants wanted
"""

_OTHER_FUNCTION_WORDS = """
    etc ie eg mr mrs ms dr cannot whilst upto thing things way ways kind sort
"""


def _words(*groups: str) -> frozenset[str]:
    """Split whitespace-separated word groups into one set of lower-case words."""
    return frozenset(word.lower() for group in groups for word in group.split())


#: About 370 English function words, lower case, for :class:`lsdask.io.ingest.words.Tokenizer`.
ENGLISH_STOPWORDS: frozenset[str] = _words(
    _ARTICLES_AND_DETERMINERS,
    _PRONOUNS,
    _PREPOSITIONS,
    _CONJUNCTIONS,
    _AUXILIARIES_AND_MODALS,
    _CONTRACTION_FRAGMENTS,
    _QUANTIFIERS,
    _ADVERBS,
    _NUMBER_WORDS,
    _COMMON_LIGHT_VERBS,
    _OTHER_FUNCTION_WORDS,
)
