//! [`Runtime`]: the Lua states of one worker thread.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use crate::coverage::Coverage;
use crate::error::ModelError;
use crate::library::{digest, Library};
use crate::shim::{load_library, EvalEngine, LoadedLibrary};

/// Why a library text does not load.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// Redis would refuse it: its error reply (code first), e.g. `ERR Error compiling
    /// function: user_function:12: …` or `ERR Error registering functions: …`.
    #[error("the library does not load: {0}")]
    Refused(String),
    /// The model failed while loading it.
    #[error(transparent)]
    Model(#[from] ModelError),
}

/// The Lua states of one worker thread: one per library text it has run, and one for EVAL
/// scripts. A Lua state is not `Send`, so each worker has its own runtime, while nodes
/// (plain data) move between workers: a node carries everything a call depends on (its
/// keyspace, subscriptions, clock and its libraries' locals), so the same node gives the
/// same answer on every runtime.
pub struct Runtime {
    coverage: bool,
    libraries: RefCell<Vec<(Arc<Library>, Rc<LoadedLibrary>)>>,
    eval: RefCell<Option<Rc<EvalEngine>>>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("coverage", &self.coverage)
            .field("libraries", &self.libraries.borrow().len())
            .finish()
    }
}

impl Default for Runtime {
    fn default() -> Self {
        Self::new()
    }
}

thread_local! {
    static THREAD_RUNTIME: Runtime = Runtime::with_coverage();
}

impl Runtime {
    /// A runtime that records no coverage.
    pub fn new() -> Self {
        Self {
            coverage: false,
            libraries: RefCell::new(Vec::new()),
            eval: RefCell::new(None),
        }
    }

    /// A runtime that records which lines of each library run (a line hook: slower).
    pub fn with_coverage() -> Self {
        Self {
            coverage: true,
            ..Self::new()
        }
    }

    /// Runs `f` with this thread's runtime (one per thread, recording coverage).
    pub fn with_thread_local<R>(f: impl FnOnce(&Runtime) -> R) -> R {
        THREAD_RUNTIME.with(f)
    }

    /// Loads `source` as `FUNCTION LOAD` would (or finds it loaded already): its
    /// description. Takes any library text, e.g. a reviewer's mutant.
    ///
    /// # Errors
    /// [`LoadError::Refused`] with Redis' reply when Redis would refuse the text (it does
    /// not compile, its body fails, it registers nothing…); [`LoadError::Model`] when the
    /// model met something it does not model while loading it.
    pub fn load(&self, source: &str) -> Result<Arc<Library>, LoadError> {
        let digest = digest(source);
        if let Some((library, _)) = self
            .libraries
            .borrow()
            .iter()
            .find(|(l, _)| l.digest == digest && *l.source == *source)
        {
            return Ok(Arc::clone(library));
        }
        let (library, loaded) = load_library(source, self.coverage)?.map_err(LoadError::Refused)?;
        let library = Arc::new(library);
        self.libraries
            .borrow_mut()
            .push((Arc::clone(&library), Rc::new(loaded)));
        Ok(library)
    }

    /// This runtime's Lua state of `library` (loaded here first if another runtime loaded
    /// it), checked to load exactly as it did there.
    pub(crate) fn library(&self, library: &Arc<Library>) -> Result<Rc<LoadedLibrary>, ModelError> {
        if let Some((_, loaded)) = self
            .libraries
            .borrow()
            .iter()
            .find(|(l, _)| Arc::ptr_eq(l, library) || l.same_text(library))
        {
            return Ok(Rc::clone(loaded));
        }
        let inconsistent = |what: &str| ModelError::Inconsistent {
            library: library.name.clone(),
            what: what.to_owned(),
        };
        let (here, loaded) = load_library(&library.source, self.coverage)?
            .map_err(|reply| inconsistent(&format!("it does not load here: {reply}")))?;
        if here.functions != library.functions {
            return Err(inconsistent("its functions differ"));
        }
        if here.locals != library.locals || here.initial != library.initial {
            return Err(inconsistent("its locals differ"));
        }
        let loaded = Rc::new(loaded);
        self.libraries
            .borrow_mut()
            .push((Arc::clone(library), Rc::clone(&loaded)));
        Ok(loaded)
    }

    /// This runtime's EVAL state.
    pub(crate) fn eval_engine(&self) -> Result<Rc<EvalEngine>, ModelError> {
        let mut eval = self.eval.borrow_mut();
        if eval.is_none() {
            *eval = Some(Rc::new(EvalEngine::new()?));
        }
        Ok(Rc::clone(eval.as_ref().expect("set above")))
    }

    /// The lines this runtime's calls ran so far (empty unless made
    /// [`Runtime::with_coverage`]). Merge the coverage of every worker with
    /// [`Coverage::merge`].
    pub fn coverage(&self) -> Coverage {
        let mut coverage = Coverage::default();
        for (library, loaded) in self.libraries.borrow().iter() {
            if let Some(lines) = &loaded.lines {
                coverage.record(library, &lines.borrow());
            }
        }
        coverage
    }
}
