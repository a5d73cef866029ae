"""English stopword lists for topic modelling.

Topic models spend their capacity on the most frequent words unless those are
removed first, and in English the most frequent words are function words that
say nothing about a document's subject.

:data:`ENGLISH_STOPWORDS`, the default of :class:`lsdask.io.ingest.words.Tokenizer`
(recorded as ``"english-2"`` in a corpus manifest), is made of:

* :data:`GLASGOW_STOPWORDS`: the 318 words of the stop word list of the
  Information Retrieval Group of the University of Glasgow, as scikit-learn
  distributes it (``sklearn.feature_extraction.text.ENGLISH_STOP_WORDS``,
  BSD 3-clause licence; the list itself is the Glasgow group's, from
  C. J. van Rijsbergen, *Information Retrieval*, 1979). It holds ``no``,
  ``nor`` and ``not``. Only the words are reproduced here, no code;
* less :data:`GLASGOW_CONTENT_WORDS`, five of its words that name a subject
  (``bill``, ``fire``, ``interest``, ``mill``, ``system``);
* plus the words of lsdask's earlier list (:data:`LEGACY_ENGLISH_STOPWORDS`)
  that Glasgow lacks: the fragments contractions leave once the tokenizer
  splits at the apostrophe (``don``, ``ve``, ``ll``, ``didn``), light verbs
  and fillers of informal text (``said``, ``make``, ``like``, ``just``,
  ``really``), and a few more function words (``despite``, ``till``).

:data:`LEGACY_ENGLISH_STOPWORDS` is the list lsdask used before, written for
this project by grouping words by grammatical role (about 370 words; it
lacks ``no``). Corpora ingested with it record ``"english"`` in their
manifest and keep it when new documents are appended to them.

All entries are lower case; content words frequent only in some corpora
(``people``, ``year``, ``government``) are left to document-frequency pruning
(``max_df``), per corpus.
"""

from __future__ import annotations

__all__ = [
    "ENGLISH_STOPWORDS",
    "GLASGOW_CONTENT_WORDS",
    "GLASGOW_STOPWORDS",
    "LEGACY_ENGLISH_STOPWORDS",
]

_GLASGOW = """
    a about above across after afterwards again against all almost alone
    along already also although always am among amongst amoungst amount an
    and another any anyhow anyone anything anyway anywhere are around as at
    back be became because become becomes becoming been before beforehand
    behind being below beside besides between beyond bill both bottom but by
    call can cannot cant co con could couldnt cry de describe detail do done
    down due during each eg eight either eleven else elsewhere empty enough
    etc even ever every everyone everything everywhere except few fifteen
    fifty fill find fire first five for former formerly forty found four
    from front full further get give go had has hasnt have he hence her here
    hereafter hereby herein hereupon hers herself him himself his how
    however hundred i ie if in inc indeed interest into is it its itself
    keep last latter latterly least less ltd made many may me meanwhile
    might mill mine more moreover most mostly move much must my myself name
    namely neither never nevertheless next nine no nobody none noone nor not
    nothing now nowhere of off often on once one only onto or other others
    otherwise our ours ourselves out over own part per perhaps please put
    rather re same see seem seemed seeming seems serious several she should
    show side since sincere six sixty so some somehow someone something
    sometime sometimes somewhere still such system take ten than that the
    their them themselves then thence there thereafter thereby therefore
    therein thereupon these they thick thin third this those though three
    through throughout thru thus to together too top toward towards twelve
    twenty two un under until up upon us very via was we well were what
    whatever when whence whenever where whereafter whereas whereby wherein
    whereupon wherever whether which while whither who whoever whole whom
    whose why will with within without would yet you your yours yourself
    yourselves
"""


def _words(*groups: str) -> frozenset[str]:
    """Split whitespace-separated word groups into one set of lower-case words."""
    return frozenset(word.lower() for group in groups for word in group.split())


#: The Glasgow IR group's 318 stop words, as in scikit-learn's ENGLISH_STOP_WORDS.
GLASGOW_STOPWORDS: frozenset[str] = _words(_GLASGOW)

#: Words of the Glasgow list that name a subject, kept as words by :data:`ENGLISH_STOPWORDS`.
GLASGOW_CONTENT_WORDS: frozenset[str] = frozenset({"bill", "fire", "interest", "mill", "system"})

_LEGACY_ARTICLES_AND_DETERMINERS = """
    an the this that these those such what which whatever whichever whose
"""

_LEGACY_PRONOUNS = """
    me my mine myself we us our ours ourselves you your yours yourself
    yourselves he him his himself she her hers herself it its itself they them
    their theirs themselves who whom whoever whomever one ones oneself
    someone somebody something anyone anybody anything everyone everybody
    everything nobody nothing none
"""

_LEGACY_PREPOSITIONS = """
    about above across after against along amid among amongst around as at
    before behind below beneath beside besides between beyond but by despite
    down during except for from in inside into like near of off on onto out
    outside over past per since than through throughout till to toward towards
    under underneath unlike until up upon versus via with within without
"""

_LEGACY_CONJUNCTIONS = """
    and or nor so yet either neither both whether if unless because although
    though while whereas whereby wherein whereupon whenever wherever however
    therefore thus hence moreover furthermore nevertheless nonetheless
    otherwise meanwhile accordingly
"""

_LEGACY_AUXILIARIES_AND_MODALS = """
    am is are was were be been being have has had having do does did doing
    done can could may might must shall should will would ought
"""

_LEGACY_CONTRACTION_FRAGMENTS = """
    don doesn didn isn aren wasn weren hasn haven hadn won wouldn couldn
    shouldn mustn mightn needn shan ain ve ll re
"""

_LEGACY_QUANTIFIERS = """
    all any each every few fewer many more most much several some enough
    less least lot lots other others another own same various
"""

_LEGACY_ADVERBS = """
    again already also always almost anyway anyhow anywhere else elsewhere
    ever even here hereby herein how indeed just later maybe merely namely
    never now often once only perhaps quite rather really seldom sometimes
    somewhat somewhere soon still then there thereafter thereby therein
    thereupon too very well when where why not yes ok okay rarely instead
    together away back ago further furthermore fairly nearly hardly
"""

_LEGACY_NUMBER_WORDS = """
    two three four five six seven eight nine ten first second third
    hundred thousand
"""

_LEGACY_COMMON_LIGHT_VERBS = """
    get gets got getting make makes made making go goes went gone going
    come comes came coming take takes took taken taking give gives gave given
    say says said saying see seen let lets put seem seems seemed become
    becomes became use used using want wants wanted
"""

_LEGACY_OTHER_FUNCTION_WORDS = """
    etc ie eg mr mrs ms dr cannot whilst upto thing things way ways kind sort
"""


#: lsdask's earlier list (about 370 words), recorded as ``"english"`` in manifests.
LEGACY_ENGLISH_STOPWORDS: frozenset[str] = _words(
    _LEGACY_ARTICLES_AND_DETERMINERS,
    _LEGACY_PRONOUNS,
    _LEGACY_PREPOSITIONS,
    _LEGACY_CONJUNCTIONS,
    _LEGACY_AUXILIARIES_AND_MODALS,
    _LEGACY_CONTRACTION_FRAGMENTS,
    _LEGACY_QUANTIFIERS,
    _LEGACY_ADVERBS,
    _LEGACY_NUMBER_WORDS,
    _LEGACY_COMMON_LIGHT_VERBS,
    _LEGACY_OTHER_FUNCTION_WORDS,
)

#: The default stopwords: Glasgow's, less its content words, plus the earlier list's others.
ENGLISH_STOPWORDS: frozenset[str] = (GLASGOW_STOPWORDS - GLASGOW_CONTENT_WORDS) | (
    LEGACY_ENGLISH_STOPWORDS - GLASGOW_STOPWORDS
)
