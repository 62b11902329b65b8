module ArticlesHelper
end
